//! Servers' answers in MAIA's terms: pulled reports kept, diagnostics
//! compared before and after an edit, locations and symbols as places,
//! columns in UTF-16 units, files small enough to open.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::client::{Client, lock};
use crate::{Diag, Place};

/// Largest file opened in a server.
const MAX_FILE: u64 = 4 << 20;

/// Keeps a pulled report; an "unchanged" report keeps what was there.
pub(crate) fn pulled(client: &Client, path: &Path, version: i32, report: Value) -> Vec<Diag> {
    use ls_types::{DocumentDiagnosticReport, DocumentDiagnosticReportResult};
    match serde_json::from_value::<DocumentDiagnosticReportResult>(report) {
        Ok(DocumentDiagnosticReportResult::Report(DocumentDiagnosticReport::Full(r))) => {
            crate::client::keep(
                &client.diags,
                path,
                Some(version),
                0,
                &r.full_document_diagnostic_report.items,
            )
        }
        _ => {
            let mut map = lock(&client.diags);
            let entry = map.entry(path.to_path_buf()).or_default();
            entry.version = Some(version);
            entry.items.clone()
        }
    }
}

/// The errors and warnings of `after` that `before` did not have, and
/// those of `before` that went away (compared by severity, message and
/// code, not by line, so lines shifted by the edit do not count).
pub(crate) fn compare(before: &[Diag], after: &[Diag]) -> (Vec<Diag>, Vec<Diag>) {
    fn minus(a: &[Diag], b: &[Diag]) -> Vec<Diag> {
        let mut left: HashMap<(crate::Severity, &str, Option<&str>), usize> = HashMap::new();
        for d in b {
            *left
                .entry((d.severity, d.message.as_str(), d.code.as_deref()))
                .or_default() += 1;
        }
        a.iter()
            .filter(|d| d.severity.counts())
            .filter(
                |d| match left.get_mut(&(d.severity, d.message.as_str(), d.code.as_deref())) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        false
                    }
                    _ => true,
                },
            )
            .cloned()
            .collect()
    }
    (minus(after, before), minus(before, after))
}

/// Locations of an answer: `Location`, `Location[]`, `LocationLink[]` or
/// `SymbolInformation[]` / `WorkspaceSymbol[]`.
pub(crate) fn places_of(answer: &Value) -> Vec<Place> {
    let items: Vec<&Value> = match answer {
        Value::Array(items) => items.iter().collect(),
        Value::Object(_) => vec![answer],
        _ => Vec::new(),
    };
    items
        .into_iter()
        .filter_map(|item| {
            let location = item.get("location").unwrap_or(item);
            let uri = location
                .get("uri")
                .or_else(|| location.get("targetUri"))
                .and_then(Value::as_str)?;
            let range = location
                .get("range")
                .or_else(|| location.get("targetSelectionRange"));
            let uri: ls_types::Uri = uri.parse().ok()?;
            let path = crate::client::path_of(&uri)?;
            let at = |k: &str| {
                range
                    .and_then(|r| r.get("start"))
                    .and_then(|s| s.get(k))
                    .and_then(Value::as_u64)
                    .map_or(1, |n| {
                        u32::try_from(n).unwrap_or(u32::MAX).saturating_add(1)
                    })
            };
            let label = item.get("name").and_then(Value::as_str).map(|name| {
                match item
                    .get("kind")
                    .and_then(Value::as_u64)
                    .and_then(symbol_kind)
                {
                    Some(kind) => format!("{kind} {name}"),
                    None => name.to_owned(),
                }
            });
            Some(Place {
                path,
                line: at("line"),
                column: at("character"),
                label,
            })
        })
        .collect()
}

fn symbol_kind(kind: u64) -> Option<&'static str> {
    const NAMES: [&str; 26] = [
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum member",
        "struct",
        "event",
        "operator",
        "type parameter",
    ];
    NAMES
        .get(usize::try_from(kind).ok()?.checked_sub(1)?)
        .copied()
}

/// The UTF-16 offset of the 1-based `column` (in characters) of 1-based
/// `line` of `text`.
pub(crate) fn utf16_column(text: &str, line: u32, column: u32) -> u32 {
    let Some(content) = text.lines().nth(line.saturating_sub(1) as usize) else {
        return column.saturating_sub(1);
    };
    let n: usize = content
        .chars()
        .take(column.saturating_sub(1) as usize)
        .map(char::len_utf16)
        .sum();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A file's text for a server, when it is small enough and text.
pub(crate) fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_FILE {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Severity;

    fn d(line: u32, severity: Severity, message: &str) -> Diag {
        Diag {
            path: "a.py".into(),
            line,
            column: 1,
            severity,
            message: message.into(),
            source: None,
            code: None,
        }
    }

    #[test]
    fn compare_ignores_shifted_lines_and_hints() {
        let before = vec![d(3, Severity::Error, "x"), d(4, Severity::Hint, "unused")];
        let after = vec![
            d(5, Severity::Error, "x"),
            d(6, Severity::Error, "y"),
            d(7, Severity::Hint, "h"),
        ];
        let (new, gone) = compare(&before, &after);
        assert_eq!(new, vec![d(6, Severity::Error, "y")]);
        assert!(gone.is_empty());
        let (new, gone) = compare(&after, &before);
        assert!(new.is_empty());
        assert_eq!(gone, vec![d(6, Severity::Error, "y")]);
    }

    #[test]
    fn columns_count_utf16_units() {
        assert_eq!(utf16_column("a😀b", 1, 3), 3);
        assert_eq!(utf16_column("x\nabc", 2, 2), 1);
    }
}
