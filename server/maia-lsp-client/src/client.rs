//! One running language server: started under the guard (and the
//! sandbox), initialized, spoken to over [`crate::wire`]. A reader task
//! answers the server's own requests, keeps what it publishes and fails
//! every waiting request when the server stops, so no caller waits on a
//! dead server.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ls_types::notification::Notification as _;
use ls_types::request::Request as _;
use ls_types::{
    ClientCapabilities, Diagnostic, DiagnosticClientCapabilities, InitializeParams,
    InitializeResult, PublishDiagnosticsClientCapabilities, PublishDiagnosticsParams,
    ServerCapabilities, TextDocumentClientCapabilities, Uri, WorkspaceFolder,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::{Diag, Severity};

/// Diagnostics kept per file (a flood is cut here).
const MAX_PER_FILE: usize = 500;
/// Files whose diagnostics are kept.
const MAX_FILES: usize = 5_000;

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The server stopped (why).
    Stopped(String),
    /// No answer in time.
    Timeout,
    /// The server answered with an error.
    Error(String),
}

/// What a server published, or answered to a pull, for one file.
#[derive(Debug, Clone, Default)]
pub(crate) struct Published {
    pub version: Option<i32>,
    /// The publication count when it came (0: a pulled report).
    pub seq: u64,
    pub items: Vec<Diag>,
}

type Pending = Mutex<HashMap<i64, oneshot::Sender<Result<Value, Failure>>>>;

/// A started, initialized server.
pub(crate) struct Client {
    pub name: String,
    pub root: PathBuf,
    stdin: tokio::sync::Mutex<ChildStdin>,
    pending: Arc<Pending>,
    next_id: AtomicI64,
    /// Diagnostics per file, as last published or pulled.
    pub diags: Arc<Mutex<HashMap<PathBuf, Published>>>,
    /// Counts publications (woken on each).
    pub published: watch::Receiver<u64>,
    /// Cancelled when the server stopped; [`Client::stop_reason`] says why.
    pub dead: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
    caps: OnceLock<ServerCapabilities>,
    /// The name and version it gave.
    pub info: OnceLock<String>,
    /// Open documents and their versions.
    pub docs: tokio::sync::Mutex<HashMap<PathBuf, (i32, String)>>,
    /// The sessions that have each open document (changed with `docs`
    /// locked): it is closed when the last one lets go.
    holders: Mutex<HashMap<PathBuf, HashSet<u64>>>,
    /// The last version of each document closed, so that one opened again
    /// goes on from there.
    closed: Mutex<HashMap<PathBuf, i32>>,
    /// Requests sent, for the restart policy and tests.
    pub sent: AtomicU64,
    _group: maia_tools::process::GroupGuard,
    _child: Mutex<tokio::process::Child>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A file's URI.
pub(crate) fn uri_of(path: &Path) -> Option<Uri> {
    Uri::from_file_path(path)
}

/// The file of a URI.
pub(crate) fn path_of(uri: &Uri) -> Option<PathBuf> {
    uri.to_file_path().map(|p| p.into_owned())
}

impl Client {
    /// Starts `config` for `root` and initializes it within `timeout`.
    pub async fn start(
        config: &ServerConfig,
        root: &Path,
        sandbox: Option<&Arc<maia_tools::sandbox::Sandbox>>,
        timeout: Duration,
    ) -> Result<Arc<Client>, String> {
        let name = config.name.clone();
        maia_tools::process::ensure_runnable(config.command.as_ref(), Some(root))
            .map_err(|e| format!("cannot start `{}`: {e}", config.command))?;
        let mut cmd = maia_tools::process::command(&config.command);
        cmd.args(&config.args)
            .envs(config.env.iter().map(|(k, v)| (k, v)))
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(sandbox) = sandbox {
            // It reads the project and writes only where commands may (its
            // caches under the session's temp folder); it needs no network.
            sandbox
                .attach_server(&mut cmd, false, &[])
                .map_err(|e| format!("cannot start `{}` in the sandbox: {e}", config.command))?;
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start `{}`: {e}", config.command))?;
        let group = maia_tools::process::GroupGuard::new(child.id());
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("no pipes to the server".into());
        };
        let (publish_tx, published) = watch::channel(0u64);
        let client = Arc::new(Client {
            name: name.clone(),
            root: root.to_path_buf(),
            stdin: tokio::sync::Mutex::new(stdin),
            pending: Arc::default(),
            next_id: AtomicI64::new(1),
            diags: Arc::default(),
            published,
            dead: CancellationToken::new(),
            reason: Arc::default(),
            caps: OnceLock::new(),
            info: OnceLock::new(),
            docs: tokio::sync::Mutex::default(),
            holders: Mutex::default(),
            closed: Mutex::default(),
            sent: AtomicU64::new(0),
            _group: group,
            _child: Mutex::new(child),
        });
        tokio::spawn(log_stderr(name.clone(), stderr));
        tokio::spawn(read_loop(Arc::downgrade(&client), stdout, publish_tx));
        let init = client
            .request(
                ls_types::request::Initialize::METHOD,
                serde_json::to_value(initialize_params(config, root)).unwrap_or_default(),
                timeout,
            )
            .await;
        let result = match init {
            Ok(v) => v,
            Err(Failure::Timeout) => {
                return Err(format!(
                    "no answer to `initialize` in {} s",
                    timeout.as_secs()
                ));
            }
            Err(Failure::Stopped(why)) => return Err(format!("it stopped while starting: {why}")),
            Err(Failure::Error(e)) => return Err(format!("`initialize` failed: {e}")),
        };
        let result: InitializeResult = serde_json::from_value(result)
            .map_err(|e| format!("an `initialize` answer MAIA cannot read: {e}"))?;
        let _ = client.caps.set(result.capabilities);
        if let Some(info) = result.server_info {
            let _ = client.info.set(match info.version {
                Some(v) => format!("{} {v}", info.name),
                None => info.name,
            });
        }
        client
            .notify(ls_types::notification::Initialized::METHOD, json!({}))
            .await;
        tracing::info!(server = %name, root = %root.display(), pulls = client.pulls(), "language server started");
        Ok(client)
    }

    /// What the server said it can do.
    pub fn caps(&self) -> Option<&ServerCapabilities> {
        self.caps.get()
    }

    /// Whether it answers `textDocument/diagnostic` (pull diagnostics).
    pub fn pulls(&self) -> bool {
        self.caps().is_some_and(|c| c.diagnostic_provider.is_some())
    }

    /// Why it stopped, once it has.
    pub fn stop_reason(&self) -> Option<String> {
        if !self.dead.is_cancelled() {
            return None;
        }
        Some(
            lock(&self.reason)
                .clone()
                .unwrap_or_else(|| "it stopped".into()),
        )
    }

    /// Sends a request and waits at most `timeout` for its answer.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Failure> {
        if let Some(why) = self.stop_reason() {
            return Err(Failure::Stopped(why));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        self.sent.fetch_add(1, Ordering::Relaxed);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if !self.send(&message).await {
            lock(&self.pending).remove(&id);
            return Err(Failure::Stopped(
                self.stop_reason()
                    .unwrap_or_else(|| "its input closed".into()),
            ));
        }
        let answer = tokio::select! {
            answer = rx => answer.unwrap_or_else(|_| Err(Failure::Stopped("it stopped".into()))),
            () = tokio::time::sleep(timeout) => Err(Failure::Timeout),
        };
        if answer == Err(Failure::Timeout) {
            lock(&self.pending).remove(&id);
            let _ = self
                .send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}))
                .await;
        }
        answer
    }

    /// Sends a notification (lost when the server stopped).
    pub async fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    async fn send(&self, message: &Value) -> bool {
        let mut stdin = self.stdin.lock().await;
        // A server that stopped reading must not hold the writer forever.
        match tokio::time::timeout(
            Duration::from_secs(5),
            crate::wire::write(&mut *stdin, message),
        )
        .await
        {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::debug!(server = %self.name, "cannot write to the server: {e}");
                false
            }
            Err(_) => {
                self.die("it stopped reading its input".into());
                false
            }
        }
    }

    fn die(&self, why: String) {
        lock(&self.reason).get_or_insert(why);
        self.dead.cancel();
        self._group.kill();
        for (_, tx) in lock(&self.pending).drain() {
            let _ = tx.send(Err(Failure::Stopped("it stopped".into())));
        }
    }

    /// Records that session `user` has `path` open (`docs` locked).
    pub fn hold(&self, path: &Path, user: u64) {
        lock(&self.holders)
            .entry(path.to_path_buf())
            .or_default()
            .insert(user);
    }

    /// The version a document opened now gets (after any it had before).
    pub fn reopened(&self, path: &Path) -> i32 {
        lock(&self.closed).get(path).map_or(1, |v| v + 1)
    }

    /// Session `user` lets go of its documents: those nobody else has are
    /// closed in the server.
    pub async fn release(&self, user: u64) {
        let mut docs = self.docs.lock().await;
        let mut gone = Vec::new();
        lock(&self.holders).retain(|path, users| {
            users.remove(&user);
            if users.is_empty() {
                gone.push(path.clone());
            }
            !users.is_empty()
        });
        for path in gone {
            let Some((version, _)) = docs.remove(&path) else {
                continue;
            };
            lock(&self.closed).insert(path.clone(), version);
            if let Some(uri) = uri_of(&path) {
                self.notify(
                    ls_types::notification::DidCloseTextDocument::METHOD,
                    json!({"textDocument": {"uri": uri}}),
                )
                .await;
            }
        }
    }

    /// The documents open in it now (for tests).
    pub async fn open_documents(&self) -> usize {
        self.docs.lock().await.len()
    }

    /// Asks it to shut down, then stops its process tree.
    pub async fn stop(&self) {
        if !self.dead.is_cancelled() {
            let _ = self
                .request("shutdown", Value::Null, Duration::from_millis(500))
                .await;
            self.notify("exit", Value::Null).await;
        }
        self.die("stopped with the session".into());
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.dead.cancel();
    }
}

fn initialize_params(config: &ServerConfig, root: &Path) -> InitializeParams {
    let uri = uri_of(root);
    #[allow(deprecated)]
    InitializeParams {
        // No process id: in the sandbox's namespaces MAIA's id may not be
        // the server's view of it, and a server watching it would exit; the
        // guard stops the server with MAIA anyway.
        process_id: None,
        root_uri: uri.clone(),
        initialization_options: config.init_options.clone(),
        capabilities: ClientCapabilities {
            text_document: Some(TextDocumentClientCapabilities {
                publish_diagnostics: Some(PublishDiagnosticsClientCapabilities {
                    version_support: Some(true),
                    ..Default::default()
                }),
                diagnostic: Some(DiagnosticClientCapabilities::default()),
                ..Default::default()
            }),
            ..Default::default()
        },
        workspace_folders: uri.map(|uri| {
            vec![WorkspaceFolder {
                uri,
                name: root
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            }]
        }),
        ..Default::default()
    }
}

/// Turns an LSP diagnostic of `path` into MAIA's.
pub(crate) fn diag_of(path: &Path, d: &Diagnostic) -> Diag {
    let severity = match d.severity {
        Some(ls_types::DiagnosticSeverity::WARNING) => Severity::Warning,
        Some(ls_types::DiagnosticSeverity::INFORMATION) => Severity::Info,
        Some(ls_types::DiagnosticSeverity::HINT) => Severity::Hint,
        _ => Severity::Error,
    };
    let code = match &d.code {
        Some(ls_types::NumberOrString::Number(n)) => Some(n.to_string()),
        Some(ls_types::NumberOrString::String(s)) => Some(s.clone()),
        None => None,
    };
    Diag {
        path: path.to_path_buf(),
        line: d.range.start.line + 1,
        column: d.range.start.character + 1,
        severity,
        message: d.message.chars().take(400).collect(),
        source: d.source.clone(),
        code,
    }
}

/// Keeps `items` as the diagnostics of `path` (capped).
pub(crate) fn keep(
    diags: &Mutex<HashMap<PathBuf, Published>>,
    path: &Path,
    version: Option<i32>,
    seq: u64,
    items: &[Diagnostic],
) -> Vec<Diag> {
    let items: Vec<Diag> = items
        .iter()
        .take(MAX_PER_FILE)
        .map(|d| diag_of(path, d))
        .collect();
    let mut map = lock(diags);
    if map.len() >= MAX_FILES && !map.contains_key(path) {
        return items;
    }
    map.insert(
        path.to_path_buf(),
        Published {
            version,
            seq,
            items: items.clone(),
        },
    );
    items
}

async fn read_loop(
    client: std::sync::Weak<Client>,
    stdout: tokio::process::ChildStdout,
    publish: watch::Sender<u64>,
) {
    let mut reader = BufReader::new(stdout);
    let why = loop {
        let message = match crate::wire::read(&mut reader, crate::wire::MAX_MESSAGE).await {
            Ok(Some(m)) => m,
            Ok(None) => break "its output ended".to_owned(),
            Err(e) => break format!("unreadable output ({e})"),
        };
        let Some(client) = client.upgrade() else {
            return;
        };
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            (None, Some(id)) => {
                let Some(id) = id.as_i64() else { continue };
                let answer = match message.get("error") {
                    Some(e) => Err(Failure::Error(
                        e.get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("error")
                            .to_owned(),
                    )),
                    None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                };
                if let Some(tx) = lock(&client.pending).remove(&id) {
                    let _ = tx.send(answer);
                }
            }
            (Some(method), Some(id)) => {
                let reply = answer_server(&client, method, message.get("params"));
                let out = match reply {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err(code) => json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": code, "message": format!("MAIA does not handle {method}")}}),
                };
                client.send(&out).await;
            }
            (Some(method), None)
                if method == ls_types::notification::PublishDiagnostics::METHOD =>
            {
                let Some(params) = message
                    .get("params")
                    .cloned()
                    .and_then(|p| serde_json::from_value::<PublishDiagnosticsParams>(p).ok())
                else {
                    continue;
                };
                if let Some(path) = path_of(&params.uri) {
                    let seq = *publish.borrow() + 1;
                    keep(
                        &client.diags,
                        &path,
                        params.version,
                        seq,
                        &params.diagnostics,
                    );
                    publish.send_replace(seq);
                }
            }
            _ => {}
        }
    };
    if let Some(client) = client.upgrade() {
        let status = lock(&client._child).try_wait().ok().flatten();
        let why = match status {
            Some(status) => format!("{why}; {status}"),
            None => why,
        };
        tracing::warn!(server = %client.name, "language server stopped: {why}");
        client.die(why);
    }
}

/// The answer to a request from the server: `Err(code)` for an error.
fn answer_server(client: &Client, method: &str, params: Option<&Value>) -> Result<Value, i64> {
    match method {
        "workspace/configuration" => {
            let n = params
                .and_then(|p| p.get("items"))
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            Ok(Value::Array(vec![Value::Null; n]))
        }
        "workspace/workspaceFolders" => Ok(json!([{
            "uri": uri_of(&client.root).map(|u| u.to_string()),
            "name": client.root.file_name().map(|n| n.to_string_lossy().into_owned()),
        }])),
        "client/registerCapability"
        | "client/unregisterCapability"
        | "window/workDoneProgress/create"
        | "workspace/diagnostic/refresh"
        | "workspace/semanticTokens/refresh"
        | "workspace/inlayHint/refresh"
        | "workspace/codeLens/refresh" => Ok(Value::Null),
        "window/showMessageRequest" => Ok(Value::Null),
        _ => Err(-32601),
    }
}

async fn log_stderr(name: String, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    let mut logged = 0usize;
    while let Ok(Some(line)) = lines.next_line().await {
        // A chatty server is logged in part, never buffered.
        if logged < 200 {
            tracing::debug!(server = %name, "{line}");
            logged += 1;
        }
    }
}
