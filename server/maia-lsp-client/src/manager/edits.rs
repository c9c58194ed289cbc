//! What an edit did, in the language servers' words: the new content sent
//! to the servers that serve a file, their diagnostics for it (pulled or
//! waited for, within the deadline), the errors a change made elsewhere,
//! and the summary after an edit or a shell command ([`EditReport`]).

use super::*;

impl LspManager {
    /// Sends `text` as the new content of `path` (opening it if need be);
    /// returns the version it now has and the publication count before.
    async fn sync(
        &self,
        client: &Client,
        path: &Path,
        text: &str,
        save: bool,
    ) -> Result<(i32, u64), String> {
        let uri = uri_of(path).ok_or_else(|| format!("{} is not a file path", path.display()))?;
        let mut docs = client.docs.lock().await;
        let since = *client.published.borrow();
        let version = match docs.get(path) {
            Some((v, old)) if old == text => {
                client.hold(path, self.user);
                return Ok((*v, since));
            }
            Some((v, _)) => {
                let v = v + 1;
                client
                    .notify(
                        ls_types::notification::DidChangeTextDocument::METHOD,
                        json!({"textDocument": {"uri": uri, "version": v},
                               "contentChanges": [{"text": text}]}),
                    )
                    .await;
                v
            }
            None => {
                let v = client.reopened(path);
                client
                    .notify(
                        ls_types::notification::DidOpenTextDocument::METHOD,
                        json!({"textDocument": {"uri": uri, "languageId": language_id(path),
                               "version": v, "text": text}}),
                    )
                    .await;
                v
            }
        };
        client.hold(path, self.user);
        if save {
            client
                .notify(
                    ls_types::notification::DidSaveTextDocument::METHOD,
                    json!({"textDocument": {"uri": uri}, "text": text}),
                )
                .await;
        }
        docs.insert(path.to_path_buf(), (version, text.to_owned()));
        Ok((version, since))
    }

    /// The diagnostics of `path` at `version`: pulled where the server
    /// answers pulls, else the first publication for that version (or,
    /// without versions, after `since`), waiting until `deadline` at most.
    async fn diagnostics(
        &self,
        client: &Client,
        path: &Path,
        (version, since): (i32, u64),
        deadline: Instant,
    ) -> Result<Vec<Diag>, String> {
        let name = &client.name;
        let stored = |exact: bool| {
            lock(&client.diags).get(path).and_then(|p| {
                let fresh = match p.version {
                    Some(v) => v == version,
                    None => !exact && p.seq > since,
                };
                fresh.then(|| p.items.clone())
            })
        };
        if let Some(items) = stored(true) {
            return Ok(items);
        }
        let waited = secs(self.settings.wait);
        if client.pulls() {
            let uri = uri_of(path).ok_or("not a file path")?;
            let left = deadline.saturating_duration_since(Instant::now());
            let answer = client
                .request(
                    ls_types::request::DocumentDiagnosticRequest::METHOD,
                    json!({"textDocument": {"uri": uri}}),
                    left,
                )
                .await;
            return match answer {
                Ok(report) => Ok(pulled(client, path, version, report)),
                Err(Failure::Timeout) => {
                    Err(format!("`{name}` gave no diagnostics within {waited}"))
                }
                Err(Failure::Stopped(why)) => Err(format!("`{name}` stopped ({why})")),
                Err(Failure::Error(e)) => Err(format!("`{name}` failed: {e}")),
            };
        }
        let mut published = client.published.clone();
        loop {
            if let Some(items) = stored(false) {
                return Ok(items);
            }
            tokio::select! {
                changed = published.changed() => if changed.is_err() {
                    client.dead.cancelled().await;
                    return Err(format!("`{name}` stopped ({})", client.stop_reason().unwrap_or_default()));
                },
                () = client.dead.cancelled() => {
                    return Err(format!("`{name}` stopped ({})", client.stop_reason().unwrap_or_default()));
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Err(format!("`{name}` gave no diagnostics within {waited}"));
                }
            }
        }
    }

    /// After an edit of `path` from `old` (`None`: a new file) to `new`:
    /// what it changed in the file's diagnostics, within the wait
    /// ([`LspSettings::wait`]). `None` when no server serves the file.
    pub async fn after_edit(
        &self,
        path: &Path,
        old: Option<&str>,
        new: &str,
    ) -> Option<EditReport> {
        let slots = self.slots_for(path, true);
        if slots.is_empty() {
            return None;
        }
        let deadline = Instant::now() + self.settings.wait;
        let checks = slots.iter().map(|slot| async move {
            let client = self.client(slot, deadline).await?;
            if client.docs.lock().await.get(path).is_none()
                && let Some(old) = old
            {
                self.sync(&client, path, old, false).await?;
            }
            let current = client.docs.lock().await.get(path).map(|(v, _)| *v);
            // What the file had before: a server that pushes gets a part of
            // the wait for it (one that never reported the file leaves it
            // empty, so all its problems count as new); pulls are answered.
            let before = match current {
                Some(v) if client.pulls() => {
                    self.diagnostics(&client, path, (v, 0), deadline).await?
                }
                Some(v) => {
                    let part = Instant::now() + self.settings.wait / 3;
                    match self
                        .diagnostics(&client, path, (v, 0), part.min(deadline))
                        .await
                    {
                        Ok(items) => items,
                        Err(_) if client.stop_reason().is_none() => Vec::new(),
                        Err(why) => return Err(why),
                    }
                }
                None => Vec::new(),
            };
            let at = self.sync(&client, path, new, true).await?;
            let after = self.diagnostics(&client, path, at, deadline).await?;
            Ok::<_, String>((client.name.clone(), before, after))
        });
        self.combine(join_all(checks).await, Some(path))
    }

    /// After a command (Bash): the files open in the running servers whose
    /// content on disk changed are sent to them, and what that changed in
    /// their diagnostics is told as for an edit (at most
    /// [`MAX_COMMAND_FILES`] files, within the wait). `None` when no open
    /// file changed.
    pub async fn after_command(&self) -> Option<EditReport> {
        let mut changed: Vec<(Arc<Client>, PathBuf, String)> = Vec::new();
        for client in self.ready() {
            let docs = client.docs.lock().await;
            for (path, (_, text)) in docs.iter() {
                if changed.len() >= MAX_COMMAND_FILES {
                    break;
                }
                if let Some(now) = read_small(path).filter(|now| now != text) {
                    changed.push((client.clone(), path.clone(), now));
                }
            }
        }
        if changed.is_empty() {
            return None;
        }
        let deadline = Instant::now() + self.settings.wait;
        let checks = changed.iter().map(|(client, path, text)| async move {
            let current = client.docs.lock().await.get(path).map(|(v, _)| *v);
            let before = match current {
                Some(v) => {
                    let part = Instant::now() + self.settings.wait / 3;
                    let until = if client.pulls() {
                        deadline
                    } else {
                        part.min(deadline)
                    };
                    self.diagnostics(client, path, (v, 0), until)
                        .await
                        .unwrap_or_default()
                }
                None => Vec::new(),
            };
            let at = self.sync(client, path, text, true).await?;
            let after = self.diagnostics(client, path, at, deadline).await?;
            Ok::<_, String>((client.name.clone(), before, after))
        });
        self.combine(join_all(checks).await, None)
    }

    /// One report of several checks (`path`: the file edited, left out of
    /// the count of errors elsewhere).
    fn combine(
        &self,
        results: Vec<Result<Check, String>>,
        path: Option<&Path>,
    ) -> Option<EditReport> {
        let mut servers: Vec<String> = Vec::new();
        let (mut introduced, mut resolved, mut unavailable) = (Vec::new(), Vec::new(), Vec::new());
        for result in results {
            match result {
                Ok((name, before, after)) => {
                    if !servers.contains(&name) {
                        servers.push(name);
                    }
                    let (new, gone) = compare(&before, &after);
                    introduced.extend(new);
                    resolved.extend(gone);
                }
                Err(why) => unavailable.push(why),
            }
        }
        if servers.is_empty() {
            return Some(EditReport::Unavailable(unavailable.join("; ")));
        }
        let touched: Vec<PathBuf> = introduced
            .iter()
            .chain(&resolved)
            .map(|d| d.path.clone())
            .chain(path.map(Path::to_path_buf))
            .collect();
        Some(EditReport::Checked {
            servers,
            introduced,
            resolved,
            elsewhere: self.errors_elsewhere(&touched),
        })
    }

    /// Errors known in files other than `touched`, and in how many files.
    fn errors_elsewhere(&self, touched: &[PathBuf]) -> (usize, usize) {
        let (mut errors, mut files) = (0, 0);
        for client in self.ready() {
            for (file, p) in lock(&client.diags).iter() {
                let n = p
                    .items
                    .iter()
                    .filter(|d| d.severity == crate::Severity::Error)
                    .count();
                if !touched.contains(file) && n > 0 {
                    errors += n;
                    files += 1;
                }
            }
        }
        (errors, files)
    }

    pub(super) fn ready(&self) -> Vec<Arc<Client>> {
        lock(&self.slots)
            .values()
            .filter_map(|slot| match &*slot.state.borrow() {
                State::Ready(c) if c.stop_reason().is_none() => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    /// Opens `path` in its servers in the background (a file the model
    /// read), so that they are warm and know the file before it is edited.
    pub fn warm(self: &Arc<Self>, path: &Path) {
        let slots = self.slots_for(path, true);
        if slots.is_empty() {
            return;
        }
        let (manager, path) = (Arc::downgrade(self), path.to_path_buf());
        tokio::spawn(async move {
            let Some(text) = read_small(&path) else {
                return;
            };
            for slot in slots {
                let Some(manager) = manager.upgrade() else {
                    return;
                };
                let deadline = Instant::now() + INIT_TIMEOUT;
                let Ok(client) = manager.client(&slot, deadline).await else {
                    continue;
                };
                if client.docs.lock().await.contains_key(&path) {
                    continue;
                }
                if let Ok(at) = manager.sync(&client, &path, &text, false).await {
                    let soon = Instant::now() + QUERY_TIMEOUT;
                    let _ = manager.diagnostics(&client, &path, at, soon).await;
                }
            }
        });
    }

    /// The running server for `path` with `text` open in it.
    pub(super) async fn open(
        &self,
        path: &Path,
        text: &str,
    ) -> Result<(Arc<Client>, (i32, u64), Instant), String> {
        let slots = self.slots_for(path, true);
        let Some(slot) = slots.first() else {
            return Err(format!("no language server serves {}", path.display()));
        };
        let deadline = Instant::now() + QUERY_TIMEOUT;
        let client = self.client(slot, deadline).await?;
        let at = self.sync(&client, path, text, false).await?;
        Ok((client, at, deadline))
    }

    /// The diagnostics of `path` (its content `text`), from its server.
    pub async fn file_diagnostics(&self, path: &Path, text: &str) -> Result<Vec<Diag>, String> {
        let (client, at, _) = self.open(path, text).await?;
        let deadline = Instant::now() + self.settings.wait.max(Duration::from_secs(5));
        self.diagnostics(&client, path, at, deadline).await
    }

    /// Every error and warning the running servers know of, by file.
    pub fn known_diagnostics(&self) -> Vec<Diag> {
        let mut out: Vec<Diag> = self
            .ready()
            .iter()
            .flat_map(|c| {
                lock(&c.diags)
                    .values()
                    .flat_map(|p| p.items.clone())
                    .filter(|d| d.severity.counts())
                    .collect::<Vec<_>>()
            })
            .collect();
        out.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
        out
    }
}
