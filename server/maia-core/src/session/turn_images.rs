//! A turn's images: kept with the prompt across a compaction, and read
//! for the model (or described when it cannot see them).

use maia_llm::ChatMessage;

use tokio_util::sync::CancellationToken;

use crate::images;
use crate::session::Session;
use crate::store::Record;

impl Session {
    /// After a compaction that kept the turn's prompt: the turn's images
    /// (of the prompt and of tool results now summarised) go on with it.
    pub(super) fn keep_images_with_prompt(&mut self) {
        if self.turn.images.is_empty() {
            return;
        }
        let Some(ChatMessage::User { content, .. }) = self
            .turn
            .prompt
            .as_ref()
            .and_then(|p| self.conversation.history().get(p.index))
        else {
            return;
        };
        let anchor = images::Anchor::User(content.clone());
        let all: Vec<maia_tools::ImageData> = self
            .turn
            .images
            .drain(..)
            .flat_map(|(_, images)| images)
            .collect();
        self.turn.images.push((anchor, all));
    }

    /// The model in use and whether it is shown images.
    pub(super) async fn vision(
        &mut self,
        cancel: &CancellationToken,
    ) -> Option<(String, images::Vision)> {
        let model = self.resolve_model(cancel).await.ok()?;
        let llm = self.project.llm.as_ref().ok()?;
        let prefetched = self
            .services
            .windows
            .model_info(llm, &model)
            .and_then(|entry| entry.supports_vision);
        let vision = images::sees_images(
            &self.services.vision,
            llm,
            &model,
            &self.project.settings.vision_models,
            prefetched,
            cancel,
        )
        .await;
        tracing::debug!(model, ?vision, "vision");
        Some((model, vision))
    }

    /// Stores the prompt's images beside the journal and records them for
    /// replay; names them in `text` as shown, or as not shown when the model
    /// does not accept images (and tells the user). Returns those to show.
    pub(super) async fn attach_images(
        &mut self,
        text: &mut String,
        found: Vec<maia_tools::ImageData>,
        cancel: &CancellationToken,
    ) -> Vec<maia_tools::ImageData> {
        if found.is_empty() {
            return found;
        }
        for image in &found {
            match images::store(&self.services.cwd, image) {
                Ok(image) => self.record(&Record::UserImage { image }),
                Err(e) => tracing::warn!("cannot store an image of the conversation: {e}"),
            }
        }
        let turn = self.next_turn();
        let vision = self.vision(cancel).await;
        let mut lines = Vec::with_capacity(found.len());
        let shown = match &vision {
            Some((_, v)) if v.sees() => {
                lines.extend(found.iter().map(|i| images::stand_in(i, turn)));
                found
            }
            Some((model, v)) => {
                self.say(images::not_shown_to_user(found.len(), model, *v));
                lines.extend(found.iter().map(|i| images::not_shown(i, model)));
                Vec::new()
            }
            // No model: the turn fails and says why.
            None => {
                lines.extend(found.iter().map(|i| images::not_shown(i, "(none)")));
                Vec::new()
            }
        };
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&lines.join("\n"));
        shown
    }
}
