//! The file checkpoints' property test, in process: random sequences of
//! turns whose `Bash` calls create, modify, delete, rename and chmod files
//! (snapshotted and recorded by the session itself), user edits between
//! turns, reverts (the last turn, from a user message, one tool call;
//! preview, token, apply; sometimes forced) and crashes that tear the
//! journal's last line, checked after every step against a model: the
//! files on disk (bytes and modes) are the model's, a revert gives back
//! the state before the undone changes except where the user changed a
//! file after MAIA (a conflict, named and kept unless forced), and the
//! journal loads with the checkpoints and reverts the model expects.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use maia_core::checkpoint::{RevertError, RevertRequest, RevertTarget};
use maia_core::store::{self, Record};
use maia_core::{Event, Mode, StopReason};
use maia_test_support as mock;
use proptest::prelude::*;
use serde_json::json;

use crate::harness::{Harness, stop_of};

/// The files the test plays with (one in a subfolder, created on demand;
/// `.gitignore`, whose patterns ignore some of the others, and an ignored
/// file).
const PATHS: [&str; 6] = [
    "a.txt",
    "b.txt",
    "sub/c.txt",
    "sub/d.sh",
    ".gitignore",
    "x.env",
];
/// What files hold: a few bytes, or an ignore pattern that names files
/// (never a folder: an ignored folder is not captured, only named).
const TEXT: &str = "[ab\n]{0,4}|\\*\\.txt\n|b\\.txt\n|\\*\\.env\n|!x\\.env\n";
/// The modes files get (600, 640 and 700 are kept beside git's tree).
const MODES: [u32; 5] = [0o644, 0o755, 0o600, 0o640, 0o700];

/// A file: its bytes and permission bits.
type File = (Vec<u8>, u32);
/// The project's files, by path.
type Tree = BTreeMap<String, File>;

/// One change to the files, by index into [`PATHS`] / [`MODES`].
#[derive(Debug, Clone)]
enum FileOp {
    Write(usize, String, usize),
    Delete(usize),
    Rename(usize, usize),
    Chmod(usize, usize),
}

/// One response's calls: a `Bash` command's changes, and maybe a `Write`
/// of a new file (path, text) run beside it.
type Batch = (Vec<FileOp>, Option<(usize, String)>);

#[derive(Debug, Clone)]
enum Op {
    /// A turn: one response per batch.
    Turn(Vec<Batch>),
    /// The user changes a file between turns.
    UserEdit(FileOp),
    /// `/undo` (`true`) or a revert of the last turn through the handle.
    Undo(bool),
    /// Revert from the turn at this index (modulo), forced or not.
    RevertFrom(usize, bool),
    /// Revert one tool call (index modulo), forced or not.
    RevertCall(usize, bool),
    /// `/rewind N` before the live user message at this index (modulo),
    /// with `--files` (`true`) or not.
    Rewind(usize, bool),
    /// A crash while a record was written, after this many of its bytes;
    /// then a restart.
    Crash(usize),
    /// A crash in the middle of a revert from the turn at this index
    /// (modulo), after this many files (modulo) were restored: what it
    /// staged is left behind; then a restart.
    CrashInRevert(usize, usize),
}

fn file_op() -> impl Strategy<Value = FileOp> {
    let path = 0..PATHS.len();
    let mode = 0..MODES.len();
    prop_oneof![
        4 => (path.clone(), TEXT, mode.clone()).prop_map(|(p, c, m)| FileOp::Write(p, c, m)),
        1 => path.clone().prop_map(FileOp::Delete),
        1 => (path.clone(), path.clone()).prop_map(|(f, t)| FileOp::Rename(f, t)),
        1 => (path, mode).prop_map(|(p, m)| FileOp::Chmod(p, m)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let write = proptest::option::weighted(0.3, (0..PATHS.len(), TEXT));
    let batch = (proptest::collection::vec(file_op(), 1..4), write);
    prop_oneof![
        6 => proptest::collection::vec(batch, 1..3).prop_map(Op::Turn),
        4 => file_op().prop_map(Op::UserEdit),
        3 => any::<bool>().prop_map(Op::Undo),
        2 => (0usize..8, proptest::bool::weighted(0.3)).prop_map(|(k, f)| Op::RevertFrom(k, f)),
        2 => (0usize..8, proptest::bool::weighted(0.3)).prop_map(|(k, f)| Op::RevertCall(k, f)),
        1 => (0usize..8, any::<bool>()).prop_map(|(k, f)| Op::Rewind(k, f)),
        1 => (0usize..400).prop_map(Op::Crash),
        1 => (0usize..8, 0usize..8).prop_map(|(k, n)| Op::CrashInRevert(k, n)),
    ]
}

/// Applies `op` to `tree` when it makes sense there (a delete, rename or
/// chmod of a missing file does nothing); returns the shell command that
/// does the same, if any.
fn apply(tree: &mut Tree, op: &FileOp) -> Option<String> {
    match op {
        FileOp::Write(p, text, m) => {
            let (path, mode) = (PATHS[*p], MODES[*m]);
            tree.insert(path.to_owned(), (text.as_bytes().to_vec(), mode));
            Some(format!(
                "mkdir -p sub && printf '%s' '{text}' > {path} && chmod {mode:o} {path}"
            ))
        }
        FileOp::Delete(p) => {
            let path = PATHS[*p];
            tree.remove(path)?;
            Some(format!("rm {path}"))
        }
        FileOp::Rename(f, t) => {
            let (from, to) = (PATHS[*f], PATHS[*t]);
            if from == to || !tree.contains_key(from) {
                return None;
            }
            let file = tree.remove(from)?;
            tree.insert(to.to_owned(), file);
            Some(format!("mkdir -p sub && mv {from} {to}"))
        }
        FileOp::Chmod(p, m) => {
            let (path, mode) = (PATHS[*p], MODES[*m]);
            tree.get_mut(path)?.1 = mode;
            Some(format!("chmod {mode:o} {path}"))
        }
    }
}

/// The same change made by the user, directly.
fn user_edit(root: &Path, op: &FileOp) {
    let full = |p: usize| root.join(PATHS[p]);
    match op {
        FileOp::Write(p, text, m) => {
            std::fs::create_dir_all(root.join("sub")).unwrap();
            std::fs::write(full(*p), text).unwrap();
            std::fs::set_permissions(full(*p), std::fs::Permissions::from_mode(MODES[*m])).unwrap();
        }
        FileOp::Delete(p) => std::fs::remove_file(full(*p)).unwrap(),
        FileOp::Rename(f, t) => {
            std::fs::create_dir_all(root.join("sub")).unwrap();
            std::fs::rename(full(*f), full(*t)).unwrap();
        }
        FileOp::Chmod(p, m) => {
            std::fs::set_permissions(full(*p), std::fs::Permissions::from_mode(MODES[*m])).unwrap();
        }
    }
}

/// The mode of a file this process creates (what `Write` gives a new
/// file: the umask's).
fn new_file_mode() -> u32 {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("probe"), "").unwrap();
    std::fs::metadata(dir.path().join("probe"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// The files on disk (regular files only; MAIA's own folder left out).
fn disk(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, out: &mut Tree) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                if relative != ".maia" {
                    walk(root, &path, out);
                }
            } else {
                let mode = meta.permissions().mode() & 0o7777;
                out.insert(relative, (std::fs::read(&path).unwrap(), mode));
            }
        }
    }
    let mut out = Tree::new();
    walk(root, root, &mut out);
    out
}

/// A checkpoint as the model sees it: one `Bash` call's trees.
#[derive(Debug, Clone)]
struct Ckpt {
    turn: usize,
    call: String,
    before: Tree,
    after: Tree,
    /// Only these paths are the call's (calls of one batch).
    paths: Option<BTreeSet<String>>,
    reverted: bool,
    /// The conflicts its (unforced) undo kept: a forced revert still
    /// restores those paths.
    kept: BTreeSet<String>,
}

impl Ckpt {
    fn new(turn: usize, call: String, plan: &Planned, paths: Option<BTreeSet<String>>) -> Self {
        Ckpt {
            turn,
            call,
            before: plan.before.clone(),
            after: plan.after.clone(),
            paths,
            reverted: false,
            kept: BTreeSet::new(),
        }
    }

    /// As a forced revert takes it: whole while live, else narrowed to the
    /// conflicts its undo kept.
    fn as_forced(&self) -> Ckpt {
        let mut c = self.clone();
        if c.reverted {
            c.paths = Some(match &self.paths {
                Some(paths) => paths.intersection(&self.kept).cloned().collect(),
                None => self.kept.clone(),
            });
        }
        c
    }

    /// The paths it changed.
    fn changed(&self) -> impl Iterator<Item = &String> {
        self.before
            .keys()
            .chain(self.after.keys())
            .filter(|p| self.before.get(*p) != self.after.get(*p))
            .filter(|p| self.paths.as_ref().is_none_or(|only| only.contains(*p)))
    }
}

/// One batch as planned: the trees before and after, and the new file
/// its `Write` makes.
struct Planned {
    before: Tree,
    after: Tree,
    write: Option<String>,
}

/// What reverting `chosen` (oldest first) does to `now`, per path, from
/// the newest checkpoint backwards: a file as the checkpoint left it gets
/// its state before; any other is a conflict, kept (forced: every path
/// gets the oldest checkpoint's before). Returns the files after and the
/// conflicts reported.
fn revert_model(now: &Tree, chosen: &[&Ckpt], force: bool) -> (Tree, BTreeSet<String>) {
    let mut paths = BTreeSet::new();
    for c in chosen {
        paths.extend(c.changed().cloned());
    }
    let mut out = now.clone();
    let mut conflicts = BTreeSet::new();
    for path in paths {
        let current = now.get(&path);
        let (mut target, mut forced, mut conflict) = (current, current, false);
        for c in chosen.iter().rev() {
            if !c.changed().any(|p| *p == path) {
                continue;
            }
            let (before, after) = (c.before.get(&path), c.after.get(&path));
            forced = before;
            if conflict {
                continue;
            }
            if target == after {
                target = before;
            } else if target == before {
                // Already undone (a revert cut short got this far).
            } else {
                conflict = true;
            }
        }
        let goal = if force { forced } else { target };
        // A conflict that nothing changes (forcing would leave it as it is) is not named.
        if conflict && !force && !(target == current && forced == current) {
            conflicts.insert(path.clone());
        }
        match goal {
            Some(file) => out.insert(path, file.clone()),
            None => out.remove(&path),
        };
    }
    (out, conflicts)
}

struct World {
    h: Harness,
    tree: Tree,
    ckpts: Vec<Ckpt>,
    /// User message id of each turn.
    turns: Vec<String>,
    /// The turns still in the thread (not rewound), in order.
    thread: Vec<usize>,
    /// Tool call ids, in order.
    calls: Vec<String>,
    session: String,
}

impl World {
    async fn turn(&mut self, batches: &[Batch]) {
        let n = self.turns.len();
        let mut planned: Vec<Planned> = Vec::new();
        let mut tree = self.tree.clone();
        for (b, (ops, write)) in batches.iter().enumerate() {
            let before = tree.clone();
            let commands: Vec<String> = ops.iter().filter_map(|o| apply(&mut tree, o)).collect();
            let command = if commands.is_empty() {
                "true".to_owned()
            } else {
                commands.join(" && ")
            };
            let touched: BTreeSet<&str> = ops
                .iter()
                .flat_map(|o| match o {
                    FileOp::Write(p, ..) | FileOp::Delete(p) | FileOp::Chmod(p, _) => vec![*p],
                    FileOp::Rename(f, t) => vec![*f, *t],
                })
                .map(|p| PATHS[p])
                .collect();
            // A Write beside the command, of a new file the command leaves
            // alone (they run at once).
            let write = write.as_ref().and_then(|(p, text)| {
                let path = PATHS[*p];
                (!before.contains_key(path) && !touched.contains(path) && !tree.contains_key(path))
                    .then(|| (path.to_owned(), text.clone()))
            });
            let mut calls = vec![(format!("t{n}b{b}"), "Bash", json!({ "command": command }))];
            if let Some((path, text)) = &write {
                tree.insert(path.clone(), (text.as_bytes().to_vec(), new_file_mode()));
                calls.push((
                    format!("t{n}b{b}w"),
                    "Write",
                    json!({ "file_path": path, "content": text }),
                ));
            }
            let reply: Vec<(&str, &str, serde_json::Value)> = calls
                .iter()
                .map(|(id, name, args)| (id.as_str(), *name, args.clone()))
                .collect();
            self.h.mock.push(mock::tool_calls_reply(&reply));
            planned.push(Planned {
                before,
                after: tree.clone(),
                write: write.map(|(path, _)| path),
            });
        }
        self.h.mock.push(mock::text_reply("done"));
        let events = self.h.prompt(&format!("turn {n}")).await;
        assert_eq!(stop_of(&events), StopReason::EndTurn);
        let id = events
            .iter()
            .find_map(|e| match e {
                Event::UserMessageSaved { message_id } => Some(message_id.clone()),
                _ => None,
            })
            .expect("the prompt was saved under an id");
        self.turns.push(id);
        self.thread.push(n);
        // The session names the calls itself: in the order they ran.
        let (mut bash, mut writes): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        for event in &events {
            if let Event::ToolCall(view) = event
                && !bash.contains(&view.id)
                && !writes.contains(&view.id)
            {
                match view.name.as_str() {
                    "Write" => writes.push(view.id.clone()),
                    _ => bash.push(view.id.clone()),
                }
            }
        }
        assert_eq!(bash.len(), planned.len(), "one command per batch");
        let mut writes = writes.into_iter();
        for (plan, command) in planned.into_iter().zip(bash) {
            self.calls.push(command.clone());
            let Some(path) = plan.write.clone() else {
                if plan.before != plan.after {
                    self.ckpts.push(Ckpt::new(n, command, &plan, None));
                }
                continue;
            };
            let write = writes.next().expect("the Write's call");
            self.calls.push(write.clone());
            // The Write owns its file; the rest is the command's.
            let rest: BTreeSet<String> = PATHS
                .iter()
                .map(|p| (*p).to_owned())
                .filter(|p| *p != path && plan.before.get(p) != plan.after.get(p))
                .collect();
            self.ckpts
                .push(Ckpt::new(n, write, &plan, Some(BTreeSet::from([path]))));
            if !rest.is_empty() {
                self.ckpts.push(Ckpt::new(n, command, &plan, Some(rest)));
            }
        }
        self.tree = tree;
    }

    /// A revert through the handle: preview, its conflicts checked, then
    /// applied with its token.
    async fn revert(&mut self, target: RevertTarget, chosen: Vec<usize>, force: bool) {
        let mut request = RevertRequest {
            target,
            preview_token: None,
            force,
            dry_run: true,
        };
        let preview = self.h.session().revert_files(request.clone()).await;
        if chosen.is_empty() {
            assert_eq!(preview, Err(RevertError::NothingToRevert));
            return;
        }
        let preview = preview.expect("a preview");
        let forced: Vec<Ckpt> = chosen.iter().map(|&i| self.ckpts[i].as_forced()).collect();
        let picked: Vec<&Ckpt> = forced.iter().collect();
        let (expected, conflicts) = revert_model(&self.tree, &picked, force);
        let named: BTreeSet<String> = preview.conflicts.iter().cloned().collect();
        if !force {
            assert_eq!(named, conflicts, "conflicts of the preview");
        }
        assert_eq!(disk(self.h.cwd()), self.tree, "a preview changes nothing");
        request.dry_run = false;
        request.preview_token = Some(preview.token.clone());
        let done = self
            .h
            .session()
            .revert_files(request)
            .await
            .expect("applied");
        assert!(done.applied);
        if !force {
            let kept: BTreeSet<String> = done.conflicts.iter().cloned().collect();
            assert_eq!(kept, conflicts, "conflicts kept");
        }
        let kept = if force { BTreeSet::new() } else { conflicts };
        self.mark_reverted(&chosen, &kept);
        self.tree = expected;
    }

    /// `chosen` were reverted, keeping `conflicts` as the user left them.
    fn mark_reverted(&mut self, chosen: &[usize], conflicts: &BTreeSet<String>) {
        for &i in chosen {
            self.ckpts[i].reverted = true;
            self.ckpts[i].kept = conflicts.clone();
        }
    }

    fn live(&self) -> impl Iterator<Item = (usize, &Ckpt)> {
        self.ckpts.iter().enumerate().filter(|(_, c)| !c.reverted)
    }

    /// What a revert takes: the live checkpoints; forced, also the
    /// reverted ones whose undo kept conflicts.
    fn revertible(&self, force: bool) -> impl Iterator<Item = (usize, &Ckpt)> {
        self.ckpts
            .iter()
            .enumerate()
            .filter(move |(_, c)| !c.reverted || (force && !c.kept.is_empty()))
    }

    async fn undo(&mut self, slash: bool) {
        let last = self.live().last().map(|(_, c)| c.turn);
        let chosen: Vec<usize> = self
            .live()
            .filter(|(_, c)| Some(c.turn) == last)
            .map(|(i, _)| i)
            .collect();
        if !slash {
            return self.revert(RevertTarget::LastTurn, chosen, false).await;
        }
        let picked: Vec<&Ckpt> = chosen.iter().map(|&i| &self.ckpts[i]).collect();
        let (expected, conflicts) = revert_model(&self.tree, &picked, false);
        let events = self.h.prompt("/undo").await;
        assert_eq!(stop_of(&events), StopReason::EndTurn);
        self.mark_reverted(&chosen, &conflicts);
        self.tree = expected;
    }

    /// `/rewind N [--files]`: the thread loses that message and what
    /// follows; with `--files` the files are restored as a revert from it
    /// would (the checkpoints outlive the rewind).
    async fn rewind(&mut self, k: usize, files: bool) {
        if self.thread.is_empty() {
            return;
        }
        let at = k % self.thread.len();
        let turn = self.thread[at];
        let flag = if files { " --files" } else { "" };
        let events = self.h.prompt(&format!("/rewind {}{flag}", at + 1)).await;
        assert_eq!(stop_of(&events), StopReason::EndTurn);
        let said = crate::harness::agent_text(&events);
        assert!(said.starts_with("Rewound before message"), "{said}");
        self.thread.truncate(at);
        if files {
            let chosen: Vec<usize> = self
                .live()
                .filter(|(_, c)| c.turn >= turn)
                .map(|(i, _)| i)
                .collect();
            let picked: Vec<&Ckpt> = chosen.iter().map(|&i| &self.ckpts[i]).collect();
            let (expected, conflicts) = revert_model(&self.tree, &picked, false);
            self.mark_reverted(&chosen, &conflicts);
            self.tree = expected;
        }
    }

    /// A crash while a record (a revert of every live checkpoint) was
    /// written, then a restart: the torn line is not read and the thread
    /// goes on.
    async fn crash(&mut self, cut: usize) {
        use std::io::Write;
        let id = self.h.stop().await;
        let ids: Vec<String> = match store::load(&self.journal()) {
            Ok(loaded) => loaded
                .records
                .into_iter()
                .filter_map(|r| match r {
                    Record::Checkpoint(c) => Some(c.id),
                    _ => None,
                })
                .collect(),
            Err(e) => panic!("the journal does not load: {e}"),
        };
        let record = Record::Reverted {
            ids,
            paths: Vec::new(),
            conflicts: Vec::new(),
        };
        let mut bytes = serde_json::to_vec(&record).unwrap();
        bytes.push(b'\n');
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.journal())
            .unwrap();
        file.write_all(&bytes[..cut % bytes.len()]).unwrap();
        drop(file);
        self.h.load(&id);
        self.h.session().set_mode(Mode::Bypass).unwrap();
    }

    /// A revert from turn `k` killed after `cut` of its files: those are
    /// as it leaves them, its staging folder (a staged file, and a file it
    /// was writing beside its target) is left, and nothing is journaled.
    /// After the restart nothing of it is left in the project, and the
    /// next revert finishes it.
    async fn crash_in_revert(&mut self, k: usize, cut: usize) {
        if self.turns.is_empty() {
            return;
        }
        let k = k % self.turns.len();
        let picked: Vec<&Ckpt> = self
            .live()
            .filter(|(_, c)| c.turn >= k)
            .map(|(_, c)| c)
            .collect();
        let (expected, _) = revert_model(&self.tree, &picked, false);
        let differing: BTreeSet<String> = self
            .tree
            .keys()
            .chain(expected.keys())
            .filter(|p| self.tree.get(*p) != expected.get(*p))
            .cloned()
            .collect();
        let cwd = self.h.cwd().to_path_buf();
        for path in differing.iter().take(cut % (differing.len() + 1)) {
            let full = cwd.join(path);
            match expected.get(path) {
                Some((bytes, mode)) => {
                    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                    std::fs::write(&full, bytes).unwrap();
                    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(*mode))
                        .unwrap();
                    self.tree.insert(path.clone(), (bytes.clone(), *mode));
                }
                None => {
                    std::fs::remove_file(&full).unwrap();
                    self.tree.remove(path);
                }
            }
        }
        let id = self.h.stop().await;
        let staging = store::sessions_dir(&cwd).join(".checkpoints/restore/cut");
        std::fs::create_dir_all(&staging).unwrap();
        std::fs::write(staging.join("lock"), "").unwrap();
        std::fs::write(staging.join("1"), "half").unwrap();
        let aside = cwd.join(".a.txt.maia-restore-0badcafe");
        std::fs::write(&aside, "half").unwrap();
        std::fs::write(staging.join("pending"), format!("{}\n", aside.display())).unwrap();
        self.h.load(&id);
        self.h.session().set_mode(Mode::Bypass).unwrap();
        assert!(!staging.exists(), "the staging folder is swept");
    }

    /// The thread's journal file (the one whose header names the session).
    fn journal(&self) -> std::path::PathBuf {
        let dir = store::sessions_dir(self.h.cwd());
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.extension().is_some_and(|e| e == "jsonl")
                    && store::load(p).is_ok_and(|l| l.header.id == self.session)
            })
            .unwrap_or_else(|| panic!("no journal of {} in {}", self.session, dir.display()))
    }

    /// The journal loads, and its checkpoints and reverts are the model's.
    fn check_journal(&self) {
        let loaded = store::load(&self.journal()).expect("the journal loads");
        let mut ids = Vec::new();
        let mut reverted = BTreeSet::new();
        for record in loaded.records {
            match record {
                Record::Checkpoint(c) => ids.push((c.id, c.tool_call_id)),
                Record::Reverted { ids, .. } => reverted.extend(ids),
                _ => {}
            }
        }
        let calls: Vec<Option<String>> = ids.iter().map(|(_, call)| call.clone()).collect();
        let expected: Vec<Option<String>> =
            self.ckpts.iter().map(|c| Some(c.call.clone())).collect();
        assert_eq!(calls, expected, "the checkpoints recorded");
        let undone: Vec<bool> = ids.iter().map(|(id, _)| reverted.contains(id)).collect();
        let expected: Vec<bool> = self.ckpts.iter().map(|c| c.reverted).collect();
        assert_eq!(undone, expected, "the checkpoints reverted");
    }

    async fn step(&mut self, op: &Op) {
        match op {
            Op::Turn(batches) => self.turn(batches).await,
            Op::UserEdit(edit) => {
                let mut tree = self.tree.clone();
                if apply(&mut tree, edit).is_some() {
                    user_edit(self.h.cwd(), edit);
                    self.tree = tree;
                }
            }
            Op::Undo(slash) => self.undo(*slash).await,
            Op::RevertFrom(k, force) => {
                if self.turns.is_empty() {
                    return;
                }
                let k = k % self.turns.len();
                let chosen = self
                    .revertible(*force)
                    .filter(|(_, c)| c.turn >= k)
                    .map(|(i, _)| i)
                    .collect();
                let target = RevertTarget::FromMessage(self.turns[k].clone());
                self.revert(target, chosen, *force).await;
            }
            Op::RevertCall(k, force) => {
                if self.calls.is_empty() {
                    return;
                }
                let call = self.calls[k % self.calls.len()].clone();
                let chosen = self
                    .revertible(*force)
                    .filter(|(_, c)| c.call == call)
                    .map(|(i, _)| i)
                    .collect();
                self.revert(RevertTarget::ToolCall(call), chosen, *force)
                    .await;
            }
            Op::Rewind(k, files) => self.rewind(*k, *files).await,
            Op::Crash(cut) => self.crash(*cut).await,
            Op::CrashInRevert(k, cut) => self.crash_in_revert(*k, *cut).await,
        }
        assert_eq!(disk(self.h.cwd()), self.tree, "the files after {op:?}");
        self.check_journal();
    }
}

async fn run(ops: Vec<Op>) {
    let h = Harness::start(json!({})).await;
    h.session().set_mode(Mode::Bypass).unwrap();
    let session = h.session().id().to_owned();
    let mut tree = Tree::new();
    // The project starts with two files, an ignore rule and a file it
    // ignores.
    for (path, text) in [
        ("a.txt", "a\n"),
        ("sub/c.txt", "c\n"),
        (".gitignore", "*.env\n"),
        ("x.env", "e\n"),
    ] {
        user_edit(
            h.cwd(),
            &FileOp::Write(
                PATHS.iter().position(|p| *p == path).unwrap(),
                text.into(),
                0,
            ),
        );
        tree.insert(path.to_owned(), (text.as_bytes().to_vec(), 0o644));
    }
    let mut world = World {
        h,
        tree,
        ckpts: Vec::new(),
        turns: Vec::new(),
        thread: Vec::new(),
        calls: Vec::new(),
        session,
    };
    for op in &ops {
        world.step(op).await;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    })]
    /// Turns that change files, user edits, reverts and crashes keep the
    /// files equal to the model's and the journal loadable and consistent.
    #[test]
    fn files_follow_the_model_through_turns_edits_reverts_and_crashes(
        ops in proptest::collection::vec(op(), 1..16)
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(ops));
    }
}

/// Found by the property test: a turn rewound without its files, then a
/// restart, then `/undo` — the restarted session had lost the rewound
/// turn's checkpoint ("no file changes to undo").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewound_turns_changes_are_still_undone_after_a_restart() {
    run(vec![
        Op::Turn(vec![(vec![FileOp::Write(0, String::new(), 0)], None)]),
        Op::Rewind(0, false),
        Op::Crash(0),
        Op::Undo(false),
    ])
    .await;
}

/// Found by the property test: the apply sent right after its preview
/// was refused ("a turn is running"): the session answered the preview
/// before it was idle again (a race: the session on another thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revert_is_applied_right_after_its_preview() {
    run(vec![
        Op::Turn(vec![(vec![FileOp::Chmod(0, 2)], None)]),
        Op::RevertCall(0, false),
        Op::Turn(vec![(vec![FileOp::Delete(2)], None)]),
        Op::Undo(false),
    ])
    .await;
}
