//! What a token's role lets a request ask, decided on the request decoded
//! as the agent reads it (`agent_client_protocol_schema`), field by field,
//! before the agent sees it.
//!
//! An observer reads: it may list sessions and attach to one
//! (`session/load`, `session/resume`), which opens a saved session that is
//! not live, as any attach after a restart must. It may never cause a
//! process to start, a file or a setting to change, so the fields of an
//! open that would are refused, not dropped (a client asking for them
//! learns they were not applied): `mcpServers` (processes the session
//! starts), `additionalDirectories` (folders the session may then read and
//! write, saved with it) and `systemPrompt`. A request that does not
//! decode is refused too: what is not read cannot be judged. Every other
//! method is refused.
//!
//! A token limited to one session may not make another: `session/fork`
//! of its session would open one it could not use.

use agent_client_protocol_schema::{v1, v2};
use serde_json::{Value, json};

use super::refusal::Refusal;

/// The refusal of an observer's `method`, naming `field` when one field
/// was the reason.
fn refused(method: &str, field: Option<&str>) -> Refusal {
    let message = match field {
        Some(field) => format!(
            "this connection is an observer (read-only): `{method}` with `{field}` is refused \
             (it would start a process or change the session)"
        ),
        None => format!("this connection is an observer (read-only): `{method}` is refused"),
    };
    let mut data = json!({"reason": "observer", "method": method});
    if let Some(field) = field {
        data["field"] = json!(field);
    }
    Refusal::new(-32600, &message).data(data)
}

/// The first field of an open an observer may not set, if any.
fn open_field(
    mcp_servers: bool,
    additional_directories: bool,
    system_prompt: bool,
) -> Option<&'static str> {
    [
        (mcp_servers, "mcpServers"),
        (additional_directories, "additionalDirectories"),
        (system_prompt, "systemPrompt"),
    ]
    .into_iter()
    .find_map(|(set, name)| set.then_some(name))
}

/// Whether an observer may send request `method` with `params` on `wire`
/// (0: v1, 1: v2): `Ok`, or the refusal to answer.
pub(super) fn observer(wire: usize, method: &str, params: &Value) -> Result<(), Refusal> {
    let undecoded = |e: &dyn std::fmt::Display| {
        Refusal::new(-32602, &format!("invalid params for {method}: {e}"))
    };
    let field = match (wire, method) {
        // v2 serves `session/list` with v1's params.
        (_, "session/list") => {
            serde_json::from_value::<v1::ListSessionsRequest>(params.clone())
                .map_err(|e| undecoded(&e))?;
            None
        }
        (0, "session/load" | "session/resume") => {
            match v1::ClientRequest::from_method_and_params(method, params)
                .map_err(|e| undecoded(&e))?
            {
                v1::ClientRequest::LoadSessionRequest(r) => open_field(
                    !r.mcp_servers.is_empty(),
                    !r.additional_directories.is_empty(),
                    r.system_prompt.is_some(),
                ),
                v1::ClientRequest::ResumeSessionRequest(r) => open_field(
                    !r.mcp_servers.is_empty(),
                    !r.additional_directories.is_empty(),
                    r.system_prompt.is_some(),
                ),
                _ => return Err(refused(method, None)),
            }
        }
        (_, "session/resume") => {
            match v2::ClientRequest::from_method_and_params(method, params)
                .map_err(|e| undecoded(&e))?
            {
                v2::ClientRequest::ResumeSessionRequest(r) => open_field(
                    !r.mcp_servers.is_empty(),
                    !r.additional_directories.is_empty(),
                    r.system_prompt.is_some(),
                ),
                _ => return Err(refused(method, None)),
            }
        }
        _ => return Err(refused(method, None)),
    };
    match field {
        Some(field) => Err(refused(method, Some(field))),
        None => Ok(()),
    }
}

/// Whether a token limited to the session `only` may send `method`: not
/// one that makes another session.
pub(super) fn limited(method: &str, only: &str) -> Result<(), Refusal> {
    if method != "session/fork" {
        return Ok(());
    }
    Err(Refusal::new(
        -32600,
        &format!("this token may only use session `{only}`: `{method}` would make another"),
    )
    .data(json!({"reason": "session", "method": method})))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(wire: usize, method: &str, params: Value) -> bool {
        observer(wire, method, &params).is_ok()
    }

    #[test]
    fn an_observer_opens_nothing_that_starts_or_changes_anything() {
        let open = json!({"sessionId": "s", "cwd": "/tmp", "mcpServers": []});
        let server = json!([{"name": "m", "command": "/bin/true", "args": [], "env": []}]);
        for method in ["session/load", "session/resume"] {
            assert!(allowed(0, method, open.clone()), "{method}");
            let mut with = open.clone();
            with["mcpServers"] = server.clone();
            assert!(!allowed(0, method, with), "{method} with a server");
            let mut with = open.clone();
            with["additionalDirectories"] = json!(["/"]);
            assert!(!allowed(0, method, with), "{method} with a folder");
        }
        assert!(allowed(
            1,
            "session/resume",
            json!({"sessionId": "s", "cwd": "/tmp"})
        ));
        let with = json!({"sessionId": "s", "cwd": "/tmp", "mcpServers": [
            {"type": "stdio", "name": "m", "command": "/bin/true"}]});
        assert!(!allowed(1, "session/resume", with));
        assert!(!allowed(1, "session/load", open.clone()));
        assert!(allowed(0, "session/list", json!({})));
        for method in [
            "session/new",
            "session/fork",
            "session/prompt",
            "_session/steering",
        ] {
            assert!(!allowed(0, method, open.clone()), "{method}");
        }
        assert!(!allowed(0, "session/load", json!({"sessionId": 3})));
    }
}
