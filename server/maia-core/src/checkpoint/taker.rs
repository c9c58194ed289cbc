//! A session's checkpoint taker ([`Checkpoints`]): the first snapshot
//! taken in the background from the first turn's start, then a snapshot before and
//! after each batch of calls that may change files. When the watch
//! ([`watch`]) saw no change since the latest snapshot, that one is the
//! answer; when it knows the paths that changed, only those are walked
//! and staged again ([`delta`]); otherwise (and whenever the latest one
//! cannot be built on) a full walk and `git add -A`.

use std::path::{Path, PathBuf};

use super::{Off, Settings, Snapshot, delta, git, walk, watch};

/// A session's checkpoint taker: the store, whether it is off (and why),
/// the watch that tells whether the project changed since the latest
/// snapshot, and the running turn's latest snapshot.
#[derive(Debug)]
pub struct Checkpoints {
    repo: git::Repo,
    /// The sessions folder (never snapshotted).
    sessions: PathBuf,
    session: String,
    /// Turned off for the session (no git, too many files, a failure).
    off: Option<Off>,
    /// Refs written so far (the next ref's number).
    next_ref: u64,
    /// The latest snapshot of the running turn.
    last: Option<Snapshot>,
    /// The latest snapshot taken, with the watch's count of changes it
    /// was taken at: while the count stays, it is the project's tree.
    latest: Option<Latest>,
    /// The watch (`None` until the first snapshot starts it).
    watch: Option<watch::Watch>,
    /// The first snapshot, taken in the background from the first turn's start.
    first: Option<tokio::task::JoinHandle<First>>,
    /// Snapshots answered by the watch without a walk (measures, tests).
    unchanged: u64,
    /// Snapshots that walked and staged only the changed paths.
    updated: u64,
    /// The user was told why checkpoints are off.
    told: bool,
}

/// What the background first snapshot leaves.
#[derive(Debug)]
struct First {
    watch: watch::Watch,
    mark: Option<u64>,
    taken: Result<Taken, Off>,
    bounds: (u64, usize),
}

/// The latest snapshot, and what tells whether the next one can be built
/// on it: the watch's count it was taken at, the bounds it was walked
/// with, the index file as it left it.
#[derive(Debug, Clone)]
struct Latest {
    count: u64,
    taken: Taken,
    bounds: (u64, usize),
}

/// A snapshot and the index file as it left it.
#[derive(Debug, Clone)]
struct Taken {
    snapshot: Snapshot,
    index: Option<Stamp>,
}

/// What tells that a file was written: size, inode, modification time.
type Stamp = (u64, u64, i64, i64);

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.ino(), meta.mtime(), meta.mtime_nsec()))
}

/// Sets the watch up (after the store exists: its markers live there).
async fn start_watch(repo: &git::Repo, sessions: &Path, session: &str) -> watch::Watch {
    // The markers are `marks/<session>.mark-<n>` (see `watch::Watch::start`).
    let marks = repo.git_dir.join("marks");
    if let Err(e) = std::fs::create_dir_all(&marks) {
        return watch::Watch::unavailable(&format!("cannot create {}: {e}", marks.display()));
    }
    let markers = marks.join(session);
    let (root, sessions) = (repo.work_tree.clone(), sessions.to_path_buf());
    tokio::task::spawn_blocking(move || watch::Watch::start(&root, &sessions, &markers))
        .await
        .unwrap_or_else(|e| watch::Watch::unavailable(&e.to_string()))
}

/// How often, and how long apart, a snapshot tries again when another
/// git holds the session's index.
const LOCK_TRIES: u32 = 100;
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// The lock of one index within the process: one snapshot at a time
/// (a session loaded again shares its index with the one it replaces,
/// whose background snapshot may still run).
fn index_lock(index: &Path) -> std::sync::Arc<tokio::sync::Mutex<()>> {
    type Locks = std::collections::HashMap<PathBuf, std::sync::Arc<tokio::sync::Mutex<()>>>;
    static LOCKS: std::sync::OnceLock<std::sync::Mutex<Locks>> = std::sync::OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    locks.retain(|_, lock| std::sync::Arc::strong_count(lock) > 1);
    locks.entry(index.to_path_buf()).or_default().clone()
}

/// A snapshot from a full walk and `git add -A` (git's stat cache keeps
/// an unchanged file from being read), kept as ref `n`.
async fn full(
    repo: &git::Repo,
    sessions: &Path,
    session: &str,
    n: u64,
    settings: &Settings,
) -> Result<Taken, Off> {
    let lock = index_lock(&repo.index);
    let _held = lock.lock().await;
    let mut again = true;
    loop {
        match walk_and_add(repo, sessions, session, n, settings).await {
            // The project changed between the walk and git's (a nested
            // repository made meanwhile): walked again, once.
            Err(Off::Failed(e)) if std::mem::take(&mut again) => {
                tracing::debug!("a snapshot is taken again: {e}");
            }
            other => return other,
        }
    }
}

async fn walk_and_add(
    repo: &git::Repo,
    sessions: &Path,
    session: &str,
    n: u64,
    settings: &Settings,
) -> Result<Taken, Off> {
    let (root, sessions) = (repo.work_tree.clone(), sessions.to_path_buf());
    let (max_bytes, max_files) = (settings.max_file_bytes, settings.max_files);
    let walk =
        tokio::task::spawn_blocking(move || walk::walk(&root, &sessions, max_bytes, max_files))
            .await
            .map_err(|e| Off::Failed(e.to_string()))?;
    if walk.too_many {
        return Err(Off::TooManyFiles(max_files));
    }
    let taken = async {
        repo.ensure().await?;
        let skip: Vec<String> = walk.oversize.iter().chain(&walk.nested).cloned().collect();
        let mut tries = 0;
        let tree = loop {
            match repo.snapshot(&skip, &walk.ignored).await {
                // Another git of this index (a session loaded again while
                // the first one's snapshot finishes): wait for it.
                Err(git::GitError::Failed { message, .. })
                    if message.contains("index.lock") && tries < LOCK_TRIES =>
                {
                    tries += 1;
                    tokio::time::sleep(LOCK_WAIT).await;
                }
                other => break other?,
            }
        };
        repo.keep(session, n, &tree).await?;
        Ok::<_, git::GitError>(tree)
    }
    .await;
    match taken {
        Ok(tree) => Ok(Taken {
            snapshot: Snapshot {
                tree,
                seen: std::sync::Arc::new(walk),
            },
            index: stamp(&repo.index),
        }),
        Err(git::GitError::Missing(m)) => Err(Off::NoGit(m)),
        Err(other) => Err(Off::Failed(other.to_string())),
    }
}

/// A snapshot built on `base`: only the `paths` the watch named walked
/// and staged again, kept as ref `n`; `None` when the full walk must
/// decide (a change [`delta`] cannot vouch for, the index written by
/// another, a failure).
async fn update(
    repo: &git::Repo,
    sessions: &Path,
    session: &str,
    n: u64,
    settings: &Settings,
    base: &Latest,
    paths: Vec<PathBuf>,
) -> Option<Taken> {
    let (max_bytes, max_files) = (settings.max_file_bytes, settings.max_files);
    if base.bounds != (max_bytes, max_files) {
        return None;
    }
    let lock = index_lock(&repo.index);
    let _held = lock.lock().await;
    if base.taken.index.is_none() || stamp(&repo.index) != base.taken.index {
        return None;
    }
    let seen = base.taken.snapshot.seen.clone();
    let (root, sessions) = (repo.work_tree.clone(), sessions.to_path_buf());
    let delta = tokio::task::spawn_blocking(move || {
        let units = delta::units(&seen, &root, &paths)?;
        delta::update(&seen, &root, &sessions, &units, max_bytes, max_files)
    })
    .await
    .ok()??;
    let tree = async {
        let tree = repo.update(&delta).await?;
        repo.keep(session, n, &tree).await?;
        Ok::<_, git::GitError>(tree)
    }
    .await
    .map_err(|e| tracing::debug!("a snapshot of the changed paths failed, rescanning: {e}"))
    .ok()?;
    Some(Taken {
        snapshot: Snapshot {
            tree,
            seen: std::sync::Arc::new(delta.walk),
        },
        index: stamp(&repo.index),
    })
}

impl Checkpoints {
    /// The checkpoints of `session` in `cwd`, whose sessions folder is
    /// `sessions` (the store is `sessions/.checkpoints`).
    pub fn new(sessions: &Path, cwd: &Path, session: &str) -> Self {
        Checkpoints {
            repo: git::Repo::new(sessions, cwd, session),
            sessions: sessions.to_path_buf(),
            session: session.to_owned(),
            off: None,
            next_ref: 0,
            last: None,
            latest: None,
            watch: None,
            first: None,
            unchanged: 0,
            updated: 0,
            told: false,
        }
    }

    /// Starts the session's first snapshot (and the watch) in the
    /// background, when checkpoints are on and a runtime runs (the session
    /// calls it as its first turn starts, beside the model's answer): the
    /// first mutating call then waits only for what is left of it.
    pub fn start(&mut self, settings: &Settings) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // Once: not after any snapshot was taken or started.
        if self.off(settings).is_some() || self.first.is_some() || self.next_ref > 0 {
            return;
        }
        let (repo, sessions, session) = (
            self.repo.clone(),
            self.sessions.clone(),
            self.session.clone(),
        );
        let (settings, n) = (settings.clone(), self.next_ref);
        let bounds = (settings.max_file_bytes, settings.max_files);
        self.next_ref += 2;
        self.first = Some(runtime.spawn(async move {
            // The first pass hashes every file and tells whether the
            // project is within `checkpoints.maxFiles`: only then is it
            // watched (a session opened on a home folder sets up nothing).
            let taken = full(&repo, &sessions, &session, n, &settings).await;
            if taken.is_err() || !settings.watch {
                let watch = watch::Watch::off();
                return First {
                    watch,
                    mark: None,
                    taken,
                    bounds,
                };
            }
            // The second, under the watch (git's stat cache: nothing is
            // read again), is the one the watch vouches for.
            let mut watch = start_watch(&repo, &sessions, &session).await;
            let mark = watch.mark().await;
            let taken = full(&repo, &sessions, &session, n + 1, &settings).await;
            First {
                watch,
                mark,
                taken,
                bounds,
            }
        }));
    }

    /// Waits for the background first snapshot, if one runs.
    async fn settle(&mut self) {
        let Some(first) = self.first.take() else {
            return;
        };
        match first.await {
            Ok(First {
                watch,
                mark,
                taken,
                bounds,
            }) => match taken {
                Ok(taken) => {
                    self.watch = Some(watch);
                    self.latest = mark.map(|count| Latest {
                        count,
                        taken,
                        bounds,
                    });
                }
                // A failure of the store may pass (the project was being
                // set up as the session opened): the first mutating call
                // tries again, and decides.
                Err(Off::Failed(e)) => tracing::debug!("the first snapshot failed: {e}"),
                Err(off) => self.off = Some(off),
            },
            Err(e) => tracing::warn!("the first checkpoint did not finish: {e}"),
        }
    }

    /// Why no checkpoints are taken, if they are not.
    pub fn off(&self, settings: &Settings) -> Option<Off> {
        match settings.enabled {
            false => Some(Off::Disabled),
            true => self.off.clone(),
        }
    }

    pub fn repo(&self) -> &git::Repo {
        &self.repo
    }

    /// A turn (or a `!command`) starts: its first mutating call takes a
    /// new snapshot before it.
    pub fn begin_turn(&mut self) {
        self.last = None;
    }

    /// How many snapshots the watch answered without a walk.
    pub fn unchanged_answers(&self) -> u64 {
        self.unchanged
    }

    /// How many snapshots walked and staged only the paths that changed.
    pub fn updated_answers(&self) -> u64 {
        self.updated
    }

    /// Whether the watch tells changes (else every snapshot is a rescan).
    pub fn watching(&self) -> bool {
        self.watch.as_ref().is_some_and(watch::Watch::watching)
    }

    /// Takes a snapshot; `Err` turns checkpoints off for the session (the
    /// text is the notice to show). When the watch saw no change since the
    /// latest snapshot, that snapshot is the answer (no walk, no git).
    pub async fn snapshot(&mut self, settings: &Settings) -> Result<Snapshot, String> {
        self.settle().await;
        if let Some(off) = self.off(settings) {
            return Err(off.to_string());
        }
        let mark = match &mut self.watch {
            Some(watch) if settings.watch => watch.mark_paths().await,
            _ => None,
        };
        if let (Some(mark), Some(latest)) = (&mark, &self.latest)
            && mark.count == latest.count
        {
            self.unchanged += 1;
            let snapshot = latest.taken.snapshot.clone();
            self.last = Some(snapshot.clone());
            return Ok(snapshot);
        }
        let bounds = (settings.max_file_bytes, settings.max_files);
        let base = self.latest.take();
        let (count, paths) = match mark {
            Some(watch::Mark { count, paths }) => (Some(count), paths),
            None => (None, None),
        };
        let (n, session) = (self.next_ref, self.session.clone());
        if let (Some(base), Some(paths)) = (&base, paths)
            && let Some(taken) = update(
                &self.repo,
                &self.sessions,
                &session,
                n,
                settings,
                base,
                paths,
            )
            .await
        {
            self.updated += 1;
            return Ok(self.taken(taken, count, bounds));
        }
        match full(&self.repo, &self.sessions, &session, n, settings).await {
            Ok(taken) => {
                let snapshot = self.taken(taken, count, bounds);
                // Watched from the first snapshot that found the project
                // within `checkpoints.maxFiles`; the next one is the first
                // the watch vouches for.
                if self.watch.is_none() && settings.watch {
                    self.watch = Some(start_watch(&self.repo, &self.sessions, &self.session).await);
                }
                Ok(snapshot)
            }
            Err(off) => {
                self.off = Some(off.clone());
                Err(off.to_string())
            }
        }
    }

    /// Notes a snapshot taken at the watch's `count` as the latest.
    fn taken(&mut self, taken: Taken, count: Option<u64>, bounds: (u64, usize)) -> Snapshot {
        self.next_ref += 1;
        let snapshot = taken.snapshot.clone();
        self.last = Some(snapshot.clone());
        self.latest = count.map(|count| Latest {
            count,
            taken,
            bounds,
        });
        snapshot
    }

    /// The snapshot before a mutating call: the turn's latest, else a new one.
    pub async fn before(&mut self, settings: &Settings) -> Result<Snapshot, String> {
        match &self.last {
            Some(last) => Ok(last.clone()),
            None => self.snapshot(settings).await,
        }
    }

    /// The paths that differ between two snapshots (content, kind or mode).
    pub async fn changed(
        &self,
        before: &Snapshot,
        after: &Snapshot,
    ) -> Result<Vec<String>, String> {
        if before.tree == after.tree && before.modes() == after.modes() {
            return Ok(Vec::new());
        }
        let mut paths: Vec<String> = self
            .repo
            .diff(&before.tree, &after.tree)
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|c| c.path)
            .collect();
        for path in before.modes().keys().chain(after.modes().keys()) {
            if before.modes().get(path) != after.modes().get(path) && !paths.contains(path) {
                paths.push(path.clone());
            }
        }
        Ok(paths)
    }

    /// Whether the user was told checkpoints are off (told once).
    pub fn take_untold(&mut self) -> bool {
        !std::mem::replace(&mut self.told, true)
    }

    /// Forgets the session's snapshots (its refs and index).
    pub async fn forget(sessions: &Path, cwd: &Path, session: &str) {
        let repo = git::Repo::new(sessions, cwd, session);
        let marks = repo.git_dir.join("marks");
        // A marker an interrupted mark left (and the folder older versions
        // kept per session).
        let _ = std::fs::remove_dir_all(marks.join(session));
        let own = format!("{session}.mark-");
        for entry in std::fs::read_dir(&marks).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&own) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        if let Err(e) = repo.forget(session).await {
            tracing::warn!("cannot remove the checkpoints of {session}: {e}");
        }
    }
}

#[cfg(test)]
#[path = "taker_tests.rs"]
mod tests;
