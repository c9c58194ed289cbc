//! The snapshot after a change the watch named: only the named paths are
//! walked again and staged, the rest of the latest snapshot's walk kept.
//! A changed path is walked again from its *unit*: the path itself, or the
//! outermost of its folders that is not a folder git held in the latest
//! walk and still holds (a new folder, an ignored one, a nested
//! repository), so that everything under it is decided as the full walk
//! decides it ([`walk`]: the same code, with the `.gitignore`s of the
//! unit's folders).
//!
//! The result is the full walk's or nothing ([`units`] and [`update`]
//! answer `None`, and the snapshot rescans): a change of an ignore file
//! (`.gitignore`; `.gitattributes`) or of a path named `.git` anywhere
//! (a nested repository made or unmade), a path not in the project or not
//! in UTF-8, and the bounds whose outcome depends on the walk's order
//! ([`walk::MAX_WATCHED`], [`walk::MAX_IGNORED_CAPTURED`]) when the change
//! touches what they bound. The count of files is kept as an upper bound
//! (files removed are not subtracted): past `checkpoints.maxFiles` the
//! full walk decides.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::{Component, Path, PathBuf};

use super::walk::{self, Kind, MAX_IGNORED_CAPTURED, MAX_WATCHED, Walk, Walker};

/// The units to walk again for the changed `paths` (absolute), outermost
/// only; `None`: the change needs a full rescan.
pub fn units(base: &Walk, root: &Path, paths: &[PathBuf]) -> Option<Vec<String>> {
    let mut units = BTreeSet::new();
    for path in paths {
        let rel = path.strip_prefix(root).ok()?;
        let mut parts = Vec::new();
        for component in rel.components() {
            let Component::Normal(name) = component else {
                return None;
            };
            let name = name.to_str()?;
            if matches!(name, ".git" | ".gitignore" | ".gitattributes") {
                return None;
            }
            parts.push(name);
        }
        let mut unit = String::new();
        for (i, name) in parts.iter().enumerate() {
            unit = walk::join(&unit, name);
            let held = i + 1 < parts.len()
                && base.dirs.contains(&unit)
                && root
                    .join(&unit)
                    .symlink_metadata()
                    .is_ok_and(|m| m.is_dir());
            if !held {
                break;
            }
        }
        if unit.is_empty() {
            return None;
        }
        units.insert(unit);
    }
    let outermost = units
        .iter()
        .filter(|unit| !ancestors(unit).any(|a| units.contains(a)))
        .cloned()
        .collect();
    Some(outermost)
}

/// The folders `path` is in, innermost first (the root not named).
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').rev().map(|(i, _)| &path[..i])
}

/// Whether `path` is `unit` or under it.
fn under(path: &str, unit: &str) -> bool {
    path.strip_prefix(unit)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The keys of `map` at or under `unit`.
fn keys_under<V>(map: &BTreeMap<String, V>, unit: &str) -> Vec<String> {
    map.range::<str, _>((Bound::Included(unit), Bound::Unbounded))
        .take_while(|(k, _)| k.starts_with(unit))
        .filter(|(k, _)| under(k, unit))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The walk updated for the units, and what git must do with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub walk: Walk,
    /// Units git holds (`git add -A`).
    pub held: Vec<String>,
    /// Units that no longer exist (their entries leave the index).
    pub gone: Vec<String>,
    /// Units git's rules leave out (ignored, nested repositories): the
    /// entries the index tracks under them are updated, as `git add -A`
    /// updates tracked files.
    pub other: Vec<String>,
    /// Ignored files under the units captured all the same (`git add -f`).
    pub forced: Vec<String>,
    /// Paths under the units left out of the snapshot (over the size
    /// bound, nested repositories).
    pub skip: Vec<String>,
}

/// `base` walked again at `units` (from [`units`]); `None`: the full walk
/// must decide.
pub fn update(
    base: &Walk,
    root: &Path,
    sessions: &Path,
    units: &[String],
    max_file_bytes: u64,
    max_files: usize,
) -> Option<Delta> {
    let mut out = base.clone();
    // Entries of the order-bound lists removed and added.
    let mut touched = 0;
    for unit in units {
        for key in keys_under(&out.watched, unit) {
            out.watched.remove(&key);
            touched += 1;
        }
        for key in keys_under(&out.modes, unit) {
            out.modes.remove(&key);
        }
        let dirs: Vec<String> = out
            .dirs
            .range::<str, _>((Bound::Included(unit.as_str()), Bound::Unbounded))
            .take_while(|d| d.starts_with(unit.as_str()))
            .filter(|d| under(d, unit))
            .cloned()
            .collect();
        for dir in dirs {
            out.dirs.remove(&dir);
        }
        let before = out.ignored.len();
        out.ignored.retain(|p| !under(p, unit));
        touched += before - out.ignored.len();
        out.oversize.retain(|p| !under(p, unit));
        out.nested.retain(|p| !under(p, unit));
    }
    let (watched, ignored) = (out.watched.len(), out.ignored.len());
    let mut walker = Walker {
        sessions,
        max_file_bytes,
        max_files,
        out,
        matchers: Vec::new(),
    };
    let (mut held, mut gone, mut other) = (Vec::new(), Vec::new(), Vec::new());
    for unit in units {
        let path = root.join(unit);
        let Ok(meta) = path.symlink_metadata() else {
            gone.push(unit.clone());
            continue;
        };
        let (parent, name) = unit.rsplit_once('/').unwrap_or(("", unit.as_str()));
        walker.matchers = matchers(root, parent);
        match walker.entry(&path, name, &meta, parent) {
            Kind::Held => held.push(unit.clone()),
            Kind::Ignored | Kind::Nested => other.push(unit.clone()),
            Kind::Left => return None,
        }
        if walker.out.too_many {
            return None;
        }
    }
    let walk = walker.finish();
    touched += walk.watched.len() - watched + walk.ignored.len() - ignored;
    let exact = if base.collapsed || base.capped {
        // Every decision past the bound is the full walk's as long as no
        // count it depends on moved.
        touched == 0
    } else {
        // Below the bounds, nothing depends on the order.
        !walk.collapsed
            && !walk.capped
            && walk.watched.len() < MAX_WATCHED
            && walk.ignored.len() < MAX_IGNORED_CAPTURED
    };
    if !exact {
        return None;
    }
    let mine = |list: &[String]| -> Vec<String> {
        list.iter()
            .filter(|p| units.iter().any(|u| under(p, u)))
            .cloned()
            .collect()
    };
    let forced = mine(&walk.ignored);
    let mut skip = mine(&walk.oversize);
    skip.extend(mine(&walk.nested));
    Some(Delta {
        walk,
        held,
        gone,
        other,
        forced,
        skip,
    })
}

/// The `.gitignore` matchers of `folder` (relative, `""` the root) and of
/// the folders it is in, outermost first.
fn matchers(root: &Path, folder: &str) -> Vec<ignore::gitignore::Gitignore> {
    let mut out = Vec::new();
    let mut dir = root.to_path_buf();
    out.extend(walk::gitignore_of(&dir));
    if !folder.is_empty() {
        for name in folder.split('/') {
            dir.push(name);
            out.extend(walk::gitignore_of(&dir));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn units_are_the_outermost_paths_not_held_before_and_now() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        let base = walk::walk(root, &root.join(".maia/.sessions"), 1024, 100);
        std::fs::create_dir_all(root.join("a/new/deep")).unwrap();
        let paths = |list: &[&str]| list.iter().map(|p| root.join(p)).collect::<Vec<_>>();
        assert_eq!(
            units(
                &base,
                root,
                &paths(&["a/b/x", "a/new/deep/y", "a/new", "z"])
            ),
            Some(vec!["a/b/x".into(), "a/new".into(), "z".into()])
        );
        assert_eq!(
            units(&base, root, &paths(&["a/b"])),
            Some(vec!["a/b".into()])
        );
        // A folder of the latest walk that is a file now is walked again.
        std::fs::remove_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b"), "f").unwrap();
        assert_eq!(
            units(&base, root, &paths(&["a/b/x"])),
            Some(vec!["a/b".into()])
        );
        for rescan in [
            "sub/.gitignore",
            "sub/.git",
            "sub/.git/HEAD",
            ".gitattributes",
        ] {
            assert_eq!(units(&base, root, &paths(&[rescan])), None, "{rescan}");
        }
        assert_eq!(units(&base, root, &[root.to_path_buf()]), None);
        assert_eq!(units(&base, root, &[PathBuf::from("/elsewhere")]), None);
    }
}
