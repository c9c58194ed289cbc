//! The language servers of the process ([`LspPool`]): one slot per
//! (server settings, sandbox rules, root), shared by every session that
//! uses it. A session joins a slot on its first file there and leaves it
//! when it ends; the documents only it had open are closed then, and the
//! server stops as soon as no session uses it (no idle grace: a session
//! that comes later starts it again). A crash is restarted for all users;
//! the notice that a server went off reaches each of them.

use super::*;

/// What makes two sessions' servers the same one: the server's settings
/// and the sandbox rules it runs under (without the session's own temp
/// folder), as text, and the root.
type Key = (String, PathBuf);

/// The language servers shared by the sessions of one process.
#[derive(Default)]
pub struct LspPool {
    slots: Mutex<HashMap<Key, Arc<Slot>>>,
    next_user: AtomicU64,
}

impl std::fmt::Debug for LspPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspPool")
            .field("slots", &lock(&self.slots).len())
            .finish_non_exhaustive()
    }
}

fn fingerprint(
    config: &ServerConfig,
    sandbox: Option<&Arc<maia_tools::sandbox::Sandbox>>,
) -> String {
    let rules = sandbox.map(|s| {
        let mut policy = s.policy().clone();
        policy.temp_dir = None;
        format!("{policy:?}")
    });
    format!("{config:?}\n{rules:?}")
}

impl LspPool {
    /// An empty pool (the engine keeps one for the process).
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// A number for a new session.
    pub(super) fn user(&self) -> u64 {
        self.next_user.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The slot of `config` at `root` for `user`, made if need be (the
    /// server then runs under `sandbox`, the first user's).
    pub(super) fn join(
        &self,
        user: u64,
        config: &ServerConfig,
        root: PathBuf,
        sandbox: Option<&Arc<maia_tools::sandbox::Sandbox>>,
        notify: &Notify,
    ) -> Arc<Slot> {
        let key = (fingerprint(config, sandbox), root.clone());
        let mut slots = lock(&self.slots);
        let slot = slots
            .entry(key)
            .or_insert_with(|| Arc::new(Slot::new(config.clone(), root, sandbox.cloned())))
            .clone();
        lock(&slot.users).insert(user, notify.clone());
        slot
    }

    /// `user` no longer uses `slot`: the documents only it had open are
    /// closed; the server stops when nobody else uses it.
    pub(super) fn leave(&self, user: u64, slot: &Arc<Slot>) {
        let mut slots = lock(&self.slots);
        let last = {
            let mut users = lock(&slot.users);
            users.remove(&user);
            users.is_empty()
        };
        if last {
            slots.retain(|_, s| !Arc::ptr_eq(s, slot));
            drop(slots);
            slot.stopped.cancel();
            let state = slot
                .state
                .send_replace(State::Off("no session uses it".into()));
            if let State::Ready(client) = state {
                spawn(async move { client.stop().await });
            }
            return;
        }
        drop(slots);
        let state = slot.state.borrow().clone();
        if let State::Ready(client) = state {
            spawn(async move { client.release(user).await });
        }
    }

    /// The servers running now (for `maia doctor` and tests).
    pub fn running(&self) -> usize {
        lock(&self.slots)
            .values()
            .filter(|s| matches!(&*s.state.borrow(), State::Ready(c) if c.stop_reason().is_none()))
            .count()
    }

    /// The documents open in the running servers (for tests).
    pub async fn documents(&self) -> usize {
        let clients: Vec<Arc<Client>> = lock(&self.slots)
            .values()
            .filter_map(|s| match &*s.state.borrow() {
                State::Ready(c) => Some(c.clone()),
                _ => None,
            })
            .collect();
        let mut n = 0;
        for client in clients {
            n += client.open_documents().await;
        }
        n
    }

    /// The slots in use, started or not.
    pub fn slots(&self) -> usize {
        lock(&self.slots).len()
    }
}

/// Runs `task` on the current runtime, if there is one (a session dropped
/// after its runtime is gone leaves its servers to their guards).
fn spawn(task: impl std::future::Future<Output = ()> + Send + 'static) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(task);
    }
}
