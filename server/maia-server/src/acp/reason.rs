//! "Reject and tell MAIA why": for a client that advertised
//! `clientCapabilities.elicitation.form`, every permission question gets
//! one more option ([`REASON_OPTION`], kind `reject_once`); choosing it
//! opens an `elicitation/create` form with one text field, and the answer
//! goes to the engine as the question's own reject option with the reason
//! (the model is told "The user rejected this: …" and the turn goes on).
//! A declined or cancelled form is a plain rejection. `_meta.reason` on the
//! permission answer ([`super::convert::permission_reply`]) is the other
//! way a reason arrives.

use agent_client_protocol_schema::v1::{
    ClientCapabilities, CreateElicitationRequest, CreateElicitationResponse, ElicitationAction,
    ElicitationContentValue, ElicitationFormMode, ElicitationSchema, ElicitationSessionScope,
    StringPropertySchema, ToolCallId,
};
use maia_core::{ChoiceKind, PermissionChoice, PermissionReply};
use maia_rpc::Connection;

use super::ask::NOTE_MAX_CHARS;

/// The option id of "Reject and tell MAIA why".
pub const REASON_OPTION: &str = "reject_with_reason";

/// The form's one field.
pub const REASON_FIELD: &str = "reason";

/// Whether the client can be asked for a reason (form elicitation).
pub fn supported(caps: &ClientCapabilities) -> bool {
    caps.elicitation.as_ref().is_some_and(|e| e.supports_form())
}

/// The question's options with "Reject and tell MAIA why" added after the
/// first reject option, when the question has one.
pub fn with_reason_option(options: &[PermissionChoice]) -> Vec<PermissionChoice> {
    let mut out = options.to_vec();
    if let Some(at) = out.iter().position(|o| o.kind == ChoiceKind::RejectOnce) {
        out.insert(
            at + 1,
            PermissionChoice {
                id: REASON_OPTION.to_owned(),
                label: "Reject and tell MAIA why".to_owned(),
                kind: ChoiceKind::RejectOnce,
            },
        );
    }
    out
}

/// The form asking for the reason.
pub fn request(session_id: &str, tool_call_id: &str, title: &str) -> CreateElicitationRequest {
    let schema = ElicitationSchema::new().property(
        REASON_FIELD,
        StringPropertySchema::new()
            .title("Why? (MAIA reads this and tries something else)".to_owned())
            .max_length(NOTE_MAX_CHARS as u32),
        true,
    );
    let scope = ElicitationSessionScope::new(session_id.to_owned())
        .tool_call_id(ToolCallId::new(tool_call_id.to_owned()));
    CreateElicitationRequest::new(
        ElicitationFormMode::new(scope, schema),
        format!("You rejected: {title}. Tell MAIA why."),
    )
}

/// The reason in the form's answer, trimmed and cut; `None` when declined,
/// cancelled, empty or unreadable.
pub fn reason_of(response: serde_json::Value) -> Option<String> {
    let response: CreateElicitationResponse = serde_json::from_value(response).ok()?;
    let ElicitationAction::Accept(accept) = response.action else {
        return None;
    };
    match accept.content?.get(REASON_FIELD)? {
        ElicitationContentValue::String(s) if !s.trim().is_empty() => {
            Some(s.trim().chars().take(NOTE_MAX_CHARS).collect())
        }
        _ => None,
    }
}

/// Turns the client's choice of [`REASON_OPTION`] into the question's own
/// reject option with the reason asked through the form; other replies
/// pass unchanged.
pub async fn resolve(
    reply: PermissionReply,
    options: &[PermissionChoice],
    (conn, session_id, tool_call_id, title): (&Connection, &str, &str, &str),
) -> PermissionReply {
    let PermissionReply::Selected { option, reason } = reply else {
        return reply;
    };
    if option != REASON_OPTION {
        return PermissionReply::Selected { option, reason };
    }
    let reject = options
        .iter()
        .find(|o| o.kind == ChoiceKind::RejectOnce)
        .map(|o| o.id.clone())
        .unwrap_or_default();
    let asked = match serde_json::to_value(request(session_id, tool_call_id, title)) {
        Ok(params) => conn.start_request("elicitation/create", params).await.ok(),
        Err(e) => {
            tracing::error!("cannot encode the reason form: {e}");
            None
        }
    };
    let reason = asked.and_then(reason_of).or(reason);
    PermissionReply::Selected {
        option: reject,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn choice(id: &str, kind: ChoiceKind) -> PermissionChoice {
        PermissionChoice {
            id: id.to_owned(),
            label: id.to_owned(),
            kind,
        }
    }

    #[test]
    fn the_reason_option_follows_the_first_reject() {
        let options = [
            choice("allow_once", ChoiceKind::AllowOnce),
            choice("reject_once", ChoiceKind::RejectOnce),
            choice("reject_always", ChoiceKind::RejectAlways),
        ];
        let ids: Vec<String> = with_reason_option(&options)
            .into_iter()
            .map(|o| o.id)
            .collect();
        assert_eq!(
            ids,
            ["allow_once", "reject_once", REASON_OPTION, "reject_always"]
        );
        assert_eq!(
            with_reason_option(&[choice("allow_once", ChoiceKind::AllowOnce)]).len(),
            1
        );
    }

    #[test]
    fn the_form_has_one_required_text_field_and_answers_are_read() {
        let value = serde_json::to_value(request("s1", "c1", "Run npm install")).unwrap();
        assert_eq!(value["mode"], "form");
        assert_eq!(value["toolCallId"], "c1");
        assert_eq!(value["requestedSchema"]["required"], json!(["reason"]));
        assert_eq!(
            reason_of(json!({"action": "accept", "content": {"reason": " use yarn "}})),
            Some("use yarn".to_owned())
        );
        assert_eq!(reason_of(json!({"action": "decline"})), None);
        assert_eq!(
            reason_of(json!({"action": "accept", "content": {"reason": 3}})),
            None
        );
    }
}
