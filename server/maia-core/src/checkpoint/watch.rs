//! Whether the project changed since a snapshot, told by the file system
//! (`notify`: inotify on Linux, FSEvents on macOS) instead of a walk: a
//! recursive watch of the project counts the changes it reports; a
//! snapshot notes the count it was taken at, and the next one is the same
//! tree when the count has not moved. Before the count is read, a marker
//! file is created in the store's own folder and its event awaited: the
//! events of one watch come in order, so every change made before that
//! moment has been counted; then a request to the watcher's thread
//! returns once the watches of the folders made before it are added
//! ([`Watch::mark`]).
//!
//! The watch only ever makes a snapshot cheaper, never different: any
//! event but a read counts as a change (the walk and git then decide what
//! changed); an overflow of the event queue (events lost, and with them
//! the watches of new folders), an error of the watch, a watch that cannot
//! be set up (e.g. the inotify limits) or a marker that does not come back
//! in time turns it off, and every snapshot is then a full rescan as
//! without it. Each is said once
//! ([`Watch::take_warning`]). Events in the sessions folder (the store, the
//! markers) and in the project's own `.git` folder are not changes of the
//! project: no snapshot holds them.
//!
//! Beside the count, the watch keeps the paths the changes named since the
//! previous mark ([`Watch::mark_paths`]), so that a snapshot can update
//! only those; the set is unknown (and a snapshot rescans) when an event
//! named no path, or more than [`MAX_PATHS`] paths changed. The count and
//! the set are read together and the set emptied in one step: a change
//! made after that moment belongs to the next mark.
//!
//! One watcher per project root serves every session of the process
//! ([`Hub`]): each session is a consumer with its own count, paths and
//! markers. A watcher that lost events (an overflow, an error) is not
//! given to a new session: it gets a watcher of its own.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{Event, RecursiveMode, Watcher};

/// How long a marker may take to come back before the watch is given up.
const MARKER_WAIT: Duration = Duration::from_secs(5);
/// Marker files are named `<session>.<prefix><n>`.
const MARKER: &str = "mark-";
/// Past this many paths changed between two marks, the set is not kept:
/// the snapshot rescans (a walk is then as cheap as the updates).
pub const MAX_PATHS: usize = 2_000;

/// The paths changed since the previous mark.
#[derive(Debug, Default)]
struct Changed {
    /// Changes seen so far (every mark; never reset).
    count: u64,
    paths: BTreeSet<PathBuf>,
    /// Some change named no path, or too many: the set is not known.
    unknown: bool,
}

impl Changed {
    fn note(&mut self, paths: Option<Vec<PathBuf>>) {
        self.count += 1;
        match paths {
            Some(paths) if !self.unknown => {
                self.paths.extend(paths);
                if self.paths.len() > MAX_PATHS {
                    self.unknown = true;
                    self.paths.clear();
                }
            }
            _ => {
                self.unknown = true;
                self.paths.clear();
            }
        }
    }
}

/// What a mark reads: the count of changes up to now, and the paths
/// changed since the previous mark (`None`: not known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub count: u64,
    pub paths: Option<Vec<PathBuf>>,
}

/// What the watch's thread reports to the snapshot taker.
#[derive(Debug, Default)]
struct Shared {
    /// Changes seen so far, and their paths since the previous mark.
    changes: Mutex<Changed>,
    /// Given up (an error): every snapshot is a full rescan.
    broken: AtomicBool,
    /// What to say once (the first overflow or failure).
    warning: Mutex<Option<String>>,
    /// Said already.
    warned: AtomicBool,
}

impl Shared {
    fn note(&self, paths: Option<Vec<PathBuf>>) {
        self.changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .note(paths);
    }

    /// The count and the paths since the previous read (emptied).
    fn read(&self) -> Mark {
        let mut changed = self
            .changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let paths = std::mem::take(&mut changed.paths);
        let unknown = std::mem::take(&mut changed.unknown);
        Mark {
            count: changed.count,
            paths: (!unknown).then(|| paths.into_iter().collect()),
        }
    }

    fn warn(&self, text: String) {
        if !self.warned.swap(true, Ordering::SeqCst)
            && let Ok(mut slot) = self.warning.lock()
        {
            tracing::warn!("{text}");
            *slot = Some(text);
        }
    }
}

/// One watcher of a project root and the sessions' handlers it feeds.
struct Hub {
    watcher: Mutex<notify::RecommendedWatcher>,
    consumers: Arc<Consumers>,
}

/// The handlers a hub's events go to, and whether it lost events.
#[derive(Default)]
struct Consumers {
    handlers: Mutex<Vec<Weak<Handler>>>,
    /// Events were lost: not to be shared with a new session.
    damaged: AtomicBool,
}

impl Consumers {
    fn dispatch(&self, event: notify::Result<Event>) {
        let mut handlers = self
            .handlers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        handlers.retain(|h| h.strong_count() > 0);
        if event.as_ref().map_or(true, Event::need_rescan) {
            self.damaged.store(true, Ordering::SeqCst);
        }
        for handler in handlers.iter().filter_map(Weak::upgrade) {
            handler.handle(match &event {
                Ok(event) => Ok(event.clone()),
                Err(e) => Err(notify::Error::generic(&e.to_string())),
            });
        }
    }

    fn add(&self, handler: &Arc<Handler>) {
        self.handlers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Arc::downgrade(handler));
    }
}

/// The hubs of the process, by project root.
fn hubs() -> &'static Mutex<HashMap<PathBuf, Weak<Hub>>> {
    static HUBS: OnceLock<Mutex<HashMap<PathBuf, Weak<Hub>>>> = OnceLock::new();
    HUBS.get_or_init(Default::default)
}

/// The recursive watch of one project for one session's snapshots.
pub struct Watch {
    /// `None`: the watch could not be set up (full rescans).
    watcher: Option<Arc<Hub>>,
    handler: Arc<Handler>,
    /// The latest marker whose event came back.
    seen: tokio::sync::watch::Receiver<u64>,
    next_marker: u64,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("watching", &self.watcher.is_some())
            .field("shared", &self.handler.shared)
            .finish()
    }
}

/// What the watch's thread does with each event.
#[derive(Debug)]
struct Handler {
    shared: Shared,
    seen: tokio::sync::watch::Sender<u64>,
    root: PathBuf,
    sessions: PathBuf,
    /// The folder of this session's markers, and their names' prefix.
    markers: PathBuf,
    prefix: String,
}

impl Handler {
    fn handle(&self, event: notify::Result<Event>) {
        match event {
            Ok(event) => {
                if event.need_rescan() {
                    // Events were lost, new folders' among them: their
                    // watches were never added.
                    self.shared.broken.store(true, Ordering::SeqCst);
                    self.shared.warn(
                        "the file watcher's event queue overflowed: checkpoints rescan the project every time"
                            .to_owned(),
                    );
                }
                match classify(
                    &event,
                    &self.root,
                    &self.sessions,
                    (&self.markers, &self.prefix),
                ) {
                    Seen::Nothing => {}
                    Seen::Change(paths) => self.shared.note(paths),
                    Seen::Marker(n) => {
                        self.seen.send_if_modified(|latest| {
                            let newer = n > *latest;
                            *latest = (*latest).max(n);
                            newer
                        });
                    }
                }
            }
            Err(e) => {
                self.shared.note(None);
                self.shared.broken.store(true, Ordering::SeqCst);
                self.shared.warn(format!(
                    "the file watcher failed ({e}): checkpoints rescan the project every time"
                ));
            }
        }
    }
}

/// What an event says.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Nothing,
    /// A change of these paths (`None`: not known).
    Change(Option<Vec<PathBuf>>),
    Marker(u64),
}

/// Reads an event: a marker of this watch, a change of the project, or
/// nothing (a read; the store's or the project's `.git`'s own files).
fn classify(event: &Event, root: &Path, sessions: &Path, markers: (&Path, &str)) -> Seen {
    let (markers, prefix) = markers;
    if event.need_rescan() {
        return Seen::Change(None);
    }
    if let EventKind::Access(kind) = event.kind
        && kind != AccessKind::Close(AccessMode::Write)
    {
        return Seen::Nothing;
    }
    if event.paths.is_empty() {
        return Seen::Change(None);
    }
    let own_git = root.join(".git");
    let mut changed = Vec::new();
    for path in &event.paths {
        if path.parent() == Some(markers)
            && let Some(n) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(prefix))
                .and_then(|n| n.parse().ok())
        {
            return Seen::Marker(n);
        }
        if !path.starts_with(sessions) && !path.starts_with(&own_git) {
            changed.push(path.clone());
        }
    }
    if changed.is_empty() {
        Seen::Nothing
    } else {
        Seen::Change(Some(changed))
    }
}

/// Sets up a watcher that sends its events to a handler.
type Setup = dyn FnOnce(
    Box<dyn FnMut(notify::Result<Event>) + Send>,
    &Path,
    &Path,
) -> notify::Result<notify::RecommendedWatcher>;

impl Watch {
    /// Watches `root` (its sessions folder `sessions` left out); markers
    /// go beside `markers`, a folder inside `sessions` that exists, named
    /// after it. Never
    /// fails: a watch that cannot be set up is a watch that always asks
    /// for a full rescan (said once).
    pub fn start(root: &Path, sessions: &Path, markers: &Path) -> Watch {
        if !markers.starts_with(root) {
            return Self::start_with(root, sessions, markers, Box::new(recursive), false);
        }
        let mut hubs = hubs()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        hubs.retain(|_, hub| hub.strong_count() > 0);
        if let Some(hub) = hubs.get(root).and_then(Weak::upgrade)
            && !hub.consumers.damaged.load(Ordering::SeqCst)
        {
            let mut watch = Self::unstarted(root, sessions, markers, false);
            hub.consumers.add(&watch.handler);
            watch.watcher = Some(hub);
            return watch;
        }
        let watch = Self::start_with(root, sessions, markers, Box::new(recursive), false);
        if let Some(hub) = &watch.watcher {
            hubs.insert(root.to_path_buf(), Arc::downgrade(hub));
        }
        watch
    }

    /// Whether two watches share one watcher.
    pub fn shares_with(&self, other: &Watch) -> bool {
        matches!((&self.watcher, &other.watcher), (Some(a), Some(b)) if Arc::ptr_eq(a, b))
    }

    /// A watch with no watcher yet.
    fn unstarted(root: &Path, sessions: &Path, markers: &Path, quiet: bool) -> Watch {
        let (seen_tx, seen) = tokio::sync::watch::channel(0u64);
        // In the folder above the session's own (`marks/`), named after it:
        // that folder is watched from the start of the project's watcher,
        // so a session joining a running watcher is heard at once.
        let (markers, prefix) = match (markers.parent(), markers.file_name()) {
            (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => (
                parent.to_path_buf(),
                format!("{}.{MARKER}", name.to_string_lossy()),
            ),
            _ => (markers.to_path_buf(), MARKER.to_owned()),
        };
        let handler = Arc::new(Handler {
            shared: Shared {
                warned: AtomicBool::new(quiet),
                ..Shared::default()
            },
            seen: seen_tx,
            root: root.to_path_buf(),
            sessions: sessions.to_path_buf(),
            markers,
            prefix,
        });
        Watch {
            watcher: None,
            handler,
            seen,
            next_marker: 0,
        }
    }

    /// As [`Watch::start`], the watcher set up by `setup`.
    /// `quiet`: a failure is not said (the watch was not wanted).
    fn start_with(
        root: &Path,
        sessions: &Path,
        markers: &Path,
        setup: Box<Setup>,
        quiet: bool,
    ) -> Watch {
        let mut watch = Self::unstarted(root, sessions, markers, quiet);
        let consumers = Arc::new(Consumers::default());
        consumers.add(&watch.handler);
        let feed = consumers.clone();
        let markers = watch.handler.markers.clone();
        match setup(Box::new(move |event| feed.dispatch(event)), root, &markers) {
            Ok(w) => {
                watch.watcher = Some(Arc::new(Hub {
                    watcher: Mutex::new(w),
                    consumers,
                }))
            }
            Err(e) => watch.give_up(format!(
                "cannot watch the project's files ({e}): checkpoints rescan the project every time"
            )),
        }
        watch
    }

    /// A watch that cannot be set up (why said once): full rescans.
    pub fn unavailable(why: &str) -> Watch {
        Self::none(why, false)
    }

    /// A watch not wanted (`checkpoints.watch` false): full rescans,
    /// nothing said.
    pub fn off() -> Watch {
        Self::none("not wanted", true)
    }

    fn none(why: &str, quiet: bool) -> Watch {
        let why = why.to_owned();
        let empty = Path::new("");
        let setup = move |_, _: &Path, _: &Path| Err(notify::Error::generic(&why));
        Self::start_with(empty, empty, empty, Box::new(setup), quiet)
    }

    fn give_up(&mut self, why: String) {
        self.watcher = None;
        self.handler.shared.broken.store(true, Ordering::SeqCst);
        self.handler.shared.warn(why);
    }

    /// The count of changes up to now (every change made before this call
    /// counted); `None` when the watch cannot tell (a full rescan).
    pub async fn mark(&mut self) -> Option<u64> {
        self.mark_paths().await.map(|m| m.count)
    }

    /// As [`Watch::mark`], with the paths changed since the previous mark.
    pub async fn mark_paths(&mut self) -> Option<Mark> {
        let shared = &self.handler.shared;
        if self.watcher.is_none() || shared.broken.load(Ordering::SeqCst) {
            return None;
        }
        self.next_marker += 1;
        let n = self.next_marker;
        let marker = (self.handler.markers).join(format!("{}{n}", self.handler.prefix));
        if let Err(e) = std::fs::write(&marker, b"") {
            self.give_up(format!(
                "cannot write the file watcher's marker {} ({e}): checkpoints rescan the project every time",
                marker.display()
            ));
            return None;
        }
        let came = tokio::time::timeout(MARKER_WAIT, self.seen.wait_for(|seen| *seen >= n))
            .await
            .is_ok_and(|r| r.is_ok());
        let _ = std::fs::remove_file(&marker);
        // The watcher's thread adds the watches of new folders after the
        // events it read with them: a request to it is answered after
        // that, so every folder made before the marker is watched now.
        let settled = came
            && self.watcher.as_ref().is_some_and(|hub| {
                hub.watcher
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .configure(notify::Config::default())
                    .is_ok()
            });
        if !settled {
            self.give_up(
                "the file watcher stopped answering: checkpoints rescan the project every time"
                    .to_owned(),
            );
            return None;
        }
        let shared = &self.handler.shared;
        if shared.broken.load(Ordering::SeqCst) {
            return None;
        }
        Some(shared.read())
    }

    /// Whether the watch tells changes (not given up).
    pub fn watching(&self) -> bool {
        self.watcher.is_some() && !self.handler.shared.broken.load(Ordering::SeqCst)
    }

    /// What to say of a failure or an overflow, the first time only.
    pub fn take_warning(&self) -> Option<String> {
        self.handler
            .shared
            .warning
            .lock()
            .ok()
            .and_then(|mut w| w.take())
    }
}

/// The watcher of the platform, recursive on `root` (and on `markers`
/// when it is elsewhere), links not followed.
fn recursive(
    handler: Box<dyn FnMut(notify::Result<Event>) + Send>,
    root: &Path,
    markers: &Path,
) -> notify::Result<notify::RecommendedWatcher> {
    let config = notify::Config::default().with_follow_symlinks(false);
    let mut watcher = notify::RecommendedWatcher::new(handler, config)?;
    watcher.watch(root, RecursiveMode::Recursive)?;
    if !markers.starts_with(root) {
        watcher.watch(markers, RecursiveMode::NonRecursive)?;
    }
    Ok(watcher)
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
