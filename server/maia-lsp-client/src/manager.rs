//! The language servers of one session: one slot per (server, root), taken
//! from the process's [`LspPool`] (so sessions on the same root share one
//! server), started on first use in the background, restarted with backoff
//! after a crash (at most [`MAX_RESTARTS`] times, then off with one notice
//! to each session using it), let go with the session. Every question is
//! bounded by a deadline; a server that is starting, slow, stopped or off
//! gives an answer that says so, never a wait without end.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use ls_types::notification::Notification as _;
use ls_types::request::Request as _;
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::{Client, Failure, lock, uri_of};
use crate::config::{LspSettings, ServerConfig, language_id};
use crate::convert::{compare, places_of, pulled, read_small, utf16_column};
use crate::{Diag, EditReport, Place};

mod edits;
mod pool;
mod queries;

pub use pool::LspPool;

/// How long a server may take to start and answer `initialize`.
pub const INIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Restarts after crashes before a server is off for the session.
pub const MAX_RESTARTS: u32 = 3;
/// Files a command changed that are checked after it.
pub const MAX_COMMAND_FILES: usize = 20;
/// How long a question of the model's tools may wait.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// One server's check of one file: its name, the diagnostics before and
/// after.
type Check = (String, Vec<Diag>, Vec<Diag>);

/// Told once per server that goes off ("X stopped; …").
pub type Notify = Arc<dyn Fn(String) + Send + Sync>;

#[derive(Clone)]
enum State {
    Idle,
    Starting,
    Ready(Arc<Client>),
    Backoff { until: Instant, why: String },
    Off(String),
}

struct Slot {
    config: ServerConfig,
    root: PathBuf,
    state: watch::Sender<State>,
    failures: AtomicU32,
    /// The sandbox the server runs under (its first user's).
    sandbox: Option<Arc<maia_tools::sandbox::Sandbox>>,
    /// The sessions using it, each with its notice sink.
    users: Mutex<HashMap<u64, Notify>>,
    /// Cancelled when no session uses it any more.
    stopped: CancellationToken,
}

impl Slot {
    fn new(
        config: ServerConfig,
        root: PathBuf,
        sandbox: Option<Arc<maia_tools::sandbox::Sandbox>>,
    ) -> Self {
        Slot {
            config,
            root,
            state: watch::channel(State::Idle).0,
            failures: AtomicU32::new(0),
            sandbox,
            users: Mutex::default(),
            stopped: CancellationToken::new(),
        }
    }
}

/// One server `maia doctor` checked.
#[derive(Debug, Clone)]
pub struct ServerCheck {
    pub name: String,
    pub command: String,
    /// The root it would serve here (`None`: no root marker here).
    pub root: Option<PathBuf>,
    /// What it said it is, or why it did not start (`None`: not tried).
    pub started: Option<Result<String, String>>,
}

/// The language servers of one session.
pub struct LspManager {
    settings: LspSettings,
    workspace: PathBuf,
    sandbox: Option<Arc<maia_tools::sandbox::Sandbox>>,
    notify: Notify,
    pool: Arc<LspPool>,
    /// This session's number in the pool.
    user: u64,
    /// The pool's slots this session uses.
    slots: Mutex<HashMap<(String, PathBuf), Arc<Slot>>>,
    stopped: CancellationToken,
    offers: std::sync::OnceLock<bool>,
}

impl std::fmt::Debug for LspManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspManager")
            .field("servers", &self.settings.servers.len())
            .finish_non_exhaustive()
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl LspManager {
    /// The servers of a session in `workspace`, shared through `pool`
    /// with the other sessions of the process; nothing starts yet.
    pub fn new(
        settings: LspSettings,
        workspace: PathBuf,
        sandbox: Option<Arc<maia_tools::sandbox::Sandbox>>,
        notify: Notify,
        pool: Arc<LspPool>,
    ) -> Self {
        LspManager {
            settings,
            workspace,
            sandbox,
            notify,
            user: pool.user(),
            pool,
            slots: Mutex::default(),
            stopped: CancellationToken::new(),
            offers: std::sync::OnceLock::new(),
        }
    }

    /// Whether no server is configured (the tools are not offered then).
    pub fn is_empty(&self) -> bool {
        self.settings.servers.is_empty()
    }

    /// Whether a server serves the project: one whose root marker is in
    /// the workspace folder or a folder right under it (the model is
    /// offered the language-server tools then).
    pub fn offers_tools(&self) -> bool {
        *self.offers.get_or_init(|| self.find_project())
    }

    fn find_project(&self) -> bool {
        let mut dirs = vec![self.workspace.clone()];
        if let Ok(entries) = std::fs::read_dir(&self.workspace) {
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .take(200),
            );
        }
        self.settings.servers.iter().any(|config| {
            config.root_markers.is_empty()
                || dirs
                    .iter()
                    .any(|d| config.root_markers.iter().any(|m| d.join(m).exists()))
        })
    }

    /// Whether some server would serve `path`.
    pub fn serves(&self, path: &Path) -> bool {
        !self.slots_for(path, false).is_empty()
    }

    /// How long an edit waits for diagnostics.
    pub fn wait(&self) -> Duration {
        self.settings.wait
    }

    fn slots_for(&self, path: &Path, create: bool) -> Vec<Arc<Slot>> {
        let mut out = Vec::new();
        for config in &self.settings.servers {
            if !config.serves(path) {
                continue;
            }
            let Some(root) = config.root_for(path, &self.workspace) else {
                continue;
            };
            out.push(self.slot(config, root, create));
        }
        out.into_iter().flatten().collect()
    }

    fn slot(&self, config: &ServerConfig, root: PathBuf, create: bool) -> Option<Arc<Slot>> {
        let mut slots = lock(&self.slots);
        let key = (config.name.clone(), root.clone());
        if let Some(slot) = slots.get(&key) {
            return Some(slot.clone());
        }
        if !create {
            return Some(Arc::new(Slot::new(config.clone(), root, None)));
        }
        if self.stopped.is_cancelled() {
            // The session ended: it joins no server again.
            return None;
        }
        let slot = self
            .pool
            .join(self.user, config, root, self.sandbox.as_ref(), &self.notify);
        slots.insert(key, slot.clone());
        Some(slot)
    }

    /// The running server of `slot`, started if need be, waiting for it
    /// until `deadline` at most.
    async fn client(&self, slot: &Arc<Slot>, deadline: Instant) -> Result<Arc<Client>, String> {
        let name = &slot.config.name;
        loop {
            let mut rx = slot.state.subscribe();
            let state = rx.borrow_and_update().clone();
            match state {
                State::Ready(client) => match client.stop_reason() {
                    None => return Ok(client),
                    Some(why) => self.failed(slot, Some(&client), why),
                },
                State::Idle => self.launch(slot),
                State::Backoff { until, why } => {
                    if Instant::now() >= until {
                        self.launch(slot);
                    } else {
                        return Err(format!("`{name}` stopped ({why}); it restarts shortly"));
                    }
                }
                State::Off(why) => return Err(why),
                State::Starting => {
                    tokio::select! {
                        changed = rx.changed() => if changed.is_err() {
                            return Err(format!("`{name}` is gone"));
                        },
                        () = tokio::time::sleep_until(deadline) => {
                            return Err(format!("`{name}` is still starting"));
                        }
                        () = self.stopped.cancelled() => return Err("the session ended".into()),
                        () = slot.stopped.cancelled() => return Err("the session ended".into()),
                    }
                }
            }
        }
    }

    /// Starts `slot`'s server in the background (unless it is already).
    fn launch(&self, slot: &Arc<Slot>) {
        let began = slot.state.send_if_modified(|state| match state {
            State::Idle | State::Backoff { .. } => {
                *state = State::Starting;
                true
            }
            _ => false,
        });
        if !began {
            return;
        }
        let (slot, stopped) = (slot.clone(), slot.stopped.clone());
        tokio::spawn(async move {
            let sandbox = slot.sandbox.clone();
            let started = tokio::select! {
                () = stopped.cancelled() => return,
                started = Client::start(&slot.config, &slot.root, sandbox.as_ref(), INIT_TIMEOUT) => started,
            };
            match started {
                Ok(client) => {
                    // Placed only if nobody stopped the slot meanwhile.
                    let placed = !stopped.is_cancelled()
                        && slot.state.send_if_modified(|state| {
                            if !matches!(state, State::Starting) {
                                return false;
                            }
                            *state = State::Ready(client.clone());
                            true
                        });
                    if !placed {
                        client.stop().await;
                    }
                }
                Err(why) => {
                    tracing::warn!(server = %slot.config.name, "language server did not start: {why}");
                    fail(&slot, None, why);
                }
            }
        });
    }

    /// Records that `slot`'s server (`client`, when it had started) stopped.
    fn failed(&self, slot: &Arc<Slot>, client: Option<&Arc<Client>>, why: String) {
        fail(slot, client, why);
    }

    /// The servers running now, by name.
    pub fn running(&self) -> Vec<String> {
        self.ready().iter().map(|c| c.name.clone()).collect()
    }

    /// What `maia doctor` shows: each server, the root it would serve in
    /// the workspace, and whether it starts (tried when `try_start`).
    pub async fn check(&self, try_start: bool) -> Vec<ServerCheck> {
        let probe = self.workspace.join("_");
        let mut out = Vec::new();
        for config in &self.settings.servers {
            let root = config.root_for(&probe, &self.workspace);
            let started = match (&root, try_start) {
                (Some(root), true) => Some(
                    match Client::start(
                        config,
                        root,
                        self.sandbox.as_ref(),
                        Duration::from_secs(20),
                    )
                    .await
                    {
                        Ok(client) => {
                            let info = client
                                .info
                                .get()
                                .cloned()
                                .unwrap_or_else(|| config.name.clone());
                            client.stop().await;
                            Ok(info)
                        }
                        Err(e) => Err(e),
                    },
                ),
                _ => None,
            };
            out.push(ServerCheck {
                name: config.name.clone(),
                command: std::iter::once(config.command.as_str())
                    .chain(config.args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" "),
                root,
                started,
            });
        }
        out
    }

    /// Lets go of every server: the documents only this session had open
    /// are closed, and a server no other session uses stops (also done on
    /// drop).
    pub fn shutdown(&self) {
        self.stopped.cancel();
        let slots: Vec<Arc<Slot>> = lock(&self.slots).drain().map(|(_, s)| s).collect();
        for slot in slots {
            self.pool.leave(self.user, &slot);
        }
    }
}

impl Drop for LspManager {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Records a failure of `slot`'s server: a backoff before the next start,
/// or off (told once to each session using it) after [`MAX_RESTARTS`].
fn fail(slot: &Slot, client: Option<&Arc<Client>>, why: String) {
    let name = slot.config.name.clone();
    let mut off = None;
    slot.state.send_if_modified(|state| {
        match (&*state, client) {
            (State::Ready(current), Some(client)) if Arc::ptr_eq(current, client) => {}
            (State::Starting, None) => {}
            _ => return false,
        }
        let n = slot.failures.fetch_add(1, Ordering::Relaxed) + 1;
        *state = if n > MAX_RESTARTS {
            let text = format!("`{name}` stopped ({why}); diagnostics off for this session");
            off = Some(text.clone());
            State::Off(text)
        } else {
            State::Backoff {
                until: Instant::now() + Duration::from_millis(500 << n.min(6)),
                why: why.clone(),
            }
        };
        true
    });
    if let Some(text) = off {
        let sinks: Vec<Notify> = lock(&slot.users).values().cloned().collect();
        for notify in sinks {
            notify(text.clone());
        }
    }
}

fn failure(client: &Client, f: Failure) -> String {
    match f {
        Failure::Timeout => format!("`{}` did not answer in time", client.name),
        Failure::Stopped(why) => format!("`{}` stopped ({why})", client.name),
        Failure::Error(e) => format!("`{}` failed: {e}", client.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_server_failing_again_and_again_is_off_with_one_notice() {
        let told: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = told.clone();
        let notify: Notify = Arc::new(move |text| lock(&sink).push(text));
        let slot = Slot::new(
            crate::config::defaults(&|c| c == "gopls").remove(0),
            "/p".into(),
            None,
        );
        lock(&slot.users).insert(1, notify);
        let mut waits = Vec::new();
        for _ in 0..=MAX_RESTARTS {
            slot.state.send_replace(State::Starting);
            fail(&slot, None, "exit status: 3".into());
            match &*slot.state.borrow() {
                State::Backoff { until, .. } => waits.push(
                    until
                        .duration_since(Instant::now())
                        .as_millis()
                        .div_ceil(100),
                ),
                State::Off(why) => assert_eq!(
                    why,
                    "`gopls` stopped (exit status: 3); diagnostics off for this session"
                ),
                _ => panic!("neither backoff nor off"),
            }
        }
        assert_eq!(waits, [10, 20, 40], "1 s, 2 s, 4 s");
        assert_eq!(lock(&told).len(), 1, "{told:?}");
        // A stale failure (of a server no longer current) changes nothing.
        fail(&slot, None, "late".into());
        assert_eq!(lock(&told).len(), 1);
    }
}
