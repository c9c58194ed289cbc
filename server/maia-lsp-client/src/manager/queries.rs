//! The questions the model asks the language servers: references and
//! definitions at a place, and workspace symbols, each bounded by
//! [`QUERY_TIMEOUT`].

use super::*;

impl LspManager {
    /// `textDocument/references` (declaration included) or
    /// `textDocument/definition` at 1-based `line`:`column` of `path`.
    pub async fn places(
        &self,
        path: &Path,
        text: &str,
        (line, column): (u32, u32),
        references: bool,
    ) -> Result<Vec<Place>, String> {
        let (client, _, deadline) = self.open(path, text).await?;
        let uri = uri_of(path).ok_or("not a file path")?;
        let position = json!({"line": line.saturating_sub(1),
                              "character": utf16_column(text, line, column)});
        let (method, params) = if references {
            (
                ls_types::request::References::METHOD,
                json!({"textDocument": {"uri": uri}, "position": position,
                       "context": {"includeDeclaration": true}}),
            )
        } else {
            (
                ls_types::request::GotoDefinition::METHOD,
                json!({"textDocument": {"uri": uri}, "position": position}),
            )
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let answer = client
            .request(method, params, left)
            .await
            .map_err(|f| failure(&client, f))?;
        Ok(places_of(&answer))
    }

    /// `workspace/symbol` on the servers of the workspace's root (started
    /// if need be) and those running.
    pub async fn symbols(&self, query: &str) -> Result<Vec<Place>, String> {
        let probe = self.workspace.join("_");
        let mut slots: Vec<Arc<Slot>> = Vec::new();
        for config in &self.settings.servers {
            if let Some(root) = config.root_for(&probe, &self.workspace) {
                slots.extend(self.slot(config, root, true));
            }
        }
        for slot in lock(&self.slots).values() {
            if !slots.iter().any(|s| Arc::ptr_eq(s, slot)) {
                slots.push(slot.clone());
            }
        }
        if slots.is_empty() {
            return Err("no language server serves this project (see `maia doctor`)".into());
        }
        let deadline = Instant::now() + QUERY_TIMEOUT;
        let asks = slots.iter().map(|slot| async move {
            let client = self.client(slot, deadline).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            client
                .request(
                    ls_types::request::WorkspaceSymbolRequest::METHOD,
                    json!({"query": query}),
                    left,
                )
                .await
                .map_err(|f| failure(&client, f))
        });
        let (mut out, mut errors) = (Vec::new(), Vec::new());
        let mut answered = false;
        for answer in join_all(asks).await {
            match answer {
                Ok(v) => {
                    answered = true;
                    out.extend(places_of(&v));
                }
                Err(e) => errors.push(e),
            }
        }
        if answered {
            Ok(out)
        } else {
            Err(errors.join("; "))
        }
    }
}
