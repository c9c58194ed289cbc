//! `AskUser` questions as `elicitation/create` in form mode, for a client
//! that advertised `clientCapabilities.elicitation.form`: one required
//! enum field with the choices, one optional free-text field. The answer
//! (accept, decline or cancel) goes back to the model.

use std::collections::BTreeMap;

use agent_client_protocol_schema::v1::{
    CreateElicitationRequest, CreateElicitationResponse, ElicitationAction,
    ElicitationContentValue, ElicitationFormMode, ElicitationSchema, ElicitationSessionScope,
    StringPropertySchema, ToolCallId,
};
use maia_core::{Answer, Asker, Question};

use super::peer::Peer;

/// The form's field holding the choice.
pub const CHOICE_FIELD: &str = "choice";
/// The form's optional free-text field.
pub const NOTE_FIELD: &str = "note";
/// The note's `maxLength`; an answer's text is cut there whatever the
/// client let through (it goes to the model).
pub const NOTE_MAX_CHARS: usize = 2_000;

#[derive(Clone)]
pub struct ClientAsker {
    peer: Peer,
}

impl ClientAsker {
    pub fn new(peer: Peer) -> Self {
        ClientAsker { peer }
    }
}

/// The `elicitation/create` request for a question.
pub fn request(session_id: &str, question: &Question) -> CreateElicitationRequest {
    let schema = ElicitationSchema::new()
        .property(
            CHOICE_FIELD,
            StringPropertySchema::new()
                .title("Answer".to_owned())
                .enum_values(question.choices.clone()),
            true,
        )
        .property(
            NOTE_FIELD,
            StringPropertySchema::new()
                .title("Anything to add (optional)".to_owned())
                .max_length(NOTE_MAX_CHARS as u32),
            false,
        );
    let scope = ElicitationSessionScope::new(session_id.to_owned())
        .tool_call_id(ToolCallId::new(question.tool_call_id.clone()));
    CreateElicitationRequest::new(
        ElicitationFormMode::new(scope, schema),
        question.question.clone(),
    )
}

/// A field's text, trimmed and cut to [`NOTE_MAX_CHARS`].
fn text(value: Option<&ElicitationContentValue>) -> Option<String> {
    match value? {
        ElicitationContentValue::String(s) if !s.trim().is_empty() => Some(cut(s.trim())),
        _ => None,
    }
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(NOTE_MAX_CHARS) {
        Some((end, _)) => format!("{}… (cut at {NOTE_MAX_CHARS} characters)", &text[..end]),
        None => text.to_owned(),
    }
}

/// Reads the client's answer; a choice that was not offered is kept as the
/// user's words.
pub fn answer(question: &Question, response: CreateElicitationResponse) -> Result<Answer, String> {
    match response.action {
        ElicitationAction::Accept(accept) => {
            let content = accept.content.unwrap_or_else(BTreeMap::new);
            let picked = text(content.get(CHOICE_FIELD));
            let mut note = text(content.get(NOTE_FIELD));
            let choice = match picked {
                Some(p) if question.choices.contains(&p) => Some(p),
                Some(other) => {
                    note = Some(match note {
                        Some(n) => cut(&format!("{other}; {n}")),
                        None => other,
                    });
                    None
                }
                None => None,
            };
            Ok(Answer::Chosen { choice, note })
        }
        ElicitationAction::Decline => Ok(Answer::Declined),
        ElicitationAction::Cancel => Ok(Answer::Cancelled),
        _ => Err("the editor answered with an unknown action".to_owned()),
    }
}

#[async_trait::async_trait]
impl Asker for ClientAsker {
    async fn ask(&self, question: &Question) -> Result<Answer, String> {
        let params = request(&self.peer.session(), question);
        let response: CreateElicitationResponse = self
            .peer
            .call("elicitation/create", params, "the editor could not show it")
            .await?;
        answer(question, response)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn question() -> Question {
        Question {
            question: "Which database?".into(),
            choices: vec!["sqlite".into(), "postgres".into()],
            tool_call_id: "tool-1".into(),
        }
    }

    #[test]
    fn the_form_has_an_enum_and_an_optional_note() {
        let value = serde_json::to_value(request("s1", &question())).unwrap();
        assert_eq!(value["mode"], "form");
        assert_eq!(value["sessionId"], "s1");
        assert_eq!(value["toolCallId"], "tool-1");
        assert_eq!(value["message"], "Which database?");
        let schema = &value["requestedSchema"];
        assert_eq!(schema["type"], "object");
        assert_eq!(
            schema["properties"]["choice"]["enum"],
            json!(["sqlite", "postgres"])
        );
        assert_eq!(schema["properties"]["note"]["type"], "string");
        assert_eq!(schema["required"], json!(["choice"]));
    }

    #[test]
    fn answers_are_read() {
        let read = |v: serde_json::Value| answer(&question(), serde_json::from_value(v).unwrap());
        assert_eq!(
            read(json!({"action": "accept", "content": {"choice": "postgres", "note": " v16 "}})),
            Ok(Answer::Chosen {
                choice: Some("postgres".into()),
                note: Some("v16".into())
            })
        );
        assert_eq!(
            read(json!({"action": "accept", "content": {"choice": "mysql"}})),
            Ok(Answer::Chosen {
                choice: None,
                note: Some("mysql".into())
            })
        );
        assert_eq!(read(json!({"action": "decline"})), Ok(Answer::Declined));
        assert_eq!(read(json!({"action": "cancel"})), Ok(Answer::Cancelled));
    }

    #[test]
    fn huge_answers_are_cut_to_the_note_length() {
        let read = |v: serde_json::Value| answer(&question(), serde_json::from_value(v).unwrap());
        let huge = "é".repeat(1_000_000);
        let noted = |a: Result<Answer, String>| match a {
            Ok(Answer::Chosen { note: Some(n), .. }) => n,
            other => panic!("{other:?}"),
        };
        for content in [
            json!({"choice": "sqlite", "note": huge}),
            json!({"choice": huge}),
            json!({"choice": huge, "note": huge}),
        ] {
            let note = noted(read(json!({"action": "accept", "content": content})));
            assert!(note.chars().count() < NOTE_MAX_CHARS + 40, "{}", note.len());
            assert!(note.ends_with("(cut at 2000 characters)"));
        }
        // Wrong shapes are unreadable answers, not panics.
        for bad in [
            json!({"action": "accept", "content": "sqlite"}),
            json!({"action": "accept", "content": ["sqlite"]}),
            json!({"action": 3}),
        ] {
            assert!(serde_json::from_value::<CreateElicitationResponse>(bad).is_err());
        }
        assert_eq!(
            read(json!({"action": "accept", "content": {"choice": 7, "note": true}})),
            Ok(Answer::Chosen {
                choice: None,
                note: None
            })
        );
    }
}
