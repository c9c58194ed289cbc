//! Reading one custom tool's definition file: the JSON (trailing commas
//! tolerated, nothing else of JSON5), its name (the folder's by default,
//! no clash with a built-in or another custom tool), its description, its
//! parameters and its `command.run` line, each problem named.

use std::path::Path;

use serde_json::Value;

use super::command::{parse_word, split_words};
use super::{CustomTool, MAX_NAME_CHARS, Param, ParamType, Segment, fingerprint, valid_name};

/// Parses one definition. `taken` are the custom tools already loaded.
pub(super) fn parse<S: AsRef<str>>(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
