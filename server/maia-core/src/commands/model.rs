//! `/model`: the endpoint's models listed (asked afresh), or one chosen.

use tokio_util::sync::CancellationToken;

use crate::session::Session;

pub(super) async fn model_command(session: &mut Session, args: &str, cancel: &CancellationToken) {
    let listed = match &session.project().llm {
        Ok(llm) => {
            // What the user asks to see is asked afresh (and kept for the rest).
            let listed = session
                .services()
                .windows
                .catalogue()
                .refresh(llm, cancel)
                .await;
            if cancel.is_cancelled() {
                return;
            }
            // Only the models the managed policy allows are offered.
            listed.map_err(|e| e.to_string()).map(|models| {
                let options = &session.services().options;
                models
                    .iter()
                    .filter(|m| options.check_model(&m.id).is_ok())
                    .cloned()
                    .collect::<Vec<_>>()
            })
        }
        Err(e) => Err(e.to_string()),
    };
    if args.is_empty() {
        let current_model = session.model().map(str::to_owned);
        let current = current_model
            .clone()
            .unwrap_or_else(|| "(not chosen yet)".into());
        let text = match listed {
            Ok(models) => {
                let lines: Vec<String> = models
                    .iter()
                    .map(|m| {
                        let mark = if Some(&m.id) == current_model.as_ref() {
                            " ← current"
                        } else {
                            ""
                        };
                        format!("- `{}`{mark}", m.id)
                    })
                    .collect();
                format!(
                    "Model in use: `{current}`\n\nAvailable:\n{}",
                    lines.join("\n")
                )
            }
            Err(e) => {
                format!("Model in use: `{current}`\n\nThe model list could not be read: {e}")
            }
        };
        session.say(text);
        return;
    }
    if let Err(refusal) = session.services().options.check_model(args) {
        session.say(format!("{refusal}."));
        return;
    }
    let known = listed
        .as_ref()
        .map(|models| models.iter().any(|m| m.id == args))
        .unwrap_or(true);
    if !known {
        session.say(format!(
            "`{args}` is not among the endpoint's models; see `/model`."
        ));
        return;
    }
    session.choose_model(args);
    session.say(format!("Now using `{args}`."));
}
