//! The checkpoint records of one batch of tool calls: which call made
//! which change, what the batch changed that git cannot hold (named as not
//! restored, [`walk::escaped`]), the folders it created, and the paths its
//! calls named outside the project.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::walk::{self, Escape};
use super::{Checkpoint, NotRestored, Snapshot};

/// The checkpoint records of one batch of calls: one per mutating call,
/// each with the paths it named when several calls changed files at once;
/// the changes no call named go to the calls that name no path (commands),
/// with what could not be captured and the folders created. Empty when
/// the batch changed nothing.
pub fn records_of_batch(
    message_id: &str,
    calls: &[(String, Vec<PathBuf>)],
    before: &Snapshot,
    after: &Snapshot,
    changed: &[String],
    cwd: &Path,
) -> Vec<Checkpoint> {
    let relative = |p: &PathBuf| {
        p.strip_prefix(cwd)
            .ok()
            .map(|r| r.to_string_lossy().into_owned())
    };
    let escaped: Vec<NotRestored> = walk::escaped(&before.seen, &after.seen)
        .into_iter()
        .map(|(path, why, files)| NotRestored { path, why, files })
        .collect();
    let created_dirs: Vec<String> = after
        .seen
        .dirs
        .difference(&before.seen.dirs)
        .cloned()
        .collect();
    let outside = |locations: &[PathBuf]| -> Vec<NotRestored> {
        locations
            .iter()
            .filter(|p| relative(p).is_none())
            .map(|p| NotRestored {
                path: p.to_string_lossy().into_owned(),
                why: Escape::OutsideProject,
                files: 0,
            })
            .collect()
    };
    let base = |tool_call_id: Option<String>, paths: Option<Vec<String>>| Checkpoint {
        id: format!("ckpt-{}", uuid::Uuid::new_v4().simple()),
        message_id: message_id.to_owned(),
        tool_call_id,
        before: before.tree.clone(),
        after: after.tree.clone(),
        paths,
        not_captured: after.not_captured().to_vec(),
        before_modes: before.modes().clone(),
        after_modes: after.modes().clone(),
        not_restored: Vec::new(),
        created_dirs: Vec::new(),
    };
    if let [(id, locations)] = calls {
        let mut record = base(Some(id.clone()), None);
        record.not_restored = escaped;
        record.not_restored.extend(outside(locations));
        record.created_dirs = created_dirs;
        let nothing =
            changed.is_empty() && record.not_restored.is_empty() && record.created_dirs.is_empty();
        return if nothing { Vec::new() } else { vec![record] };
    }
    let mut named: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for (id, locations) in calls.iter().filter(|(_, l)| !l.is_empty()) {
        let mine: Vec<String> = locations
            .iter()
            .filter_map(relative)
            .filter(|p| changed.contains(p))
            .collect();
        named.extend(mine.iter().cloned());
        let away = outside(locations);
        if !mine.is_empty() || !away.is_empty() {
            let mut record = base(Some(id.clone()), Some(mine));
            record.not_restored = away;
            out.push(record);
        }
    }
    let rest: Vec<String> = changed
        .iter()
        .filter(|p| !named.contains(*p))
        .cloned()
        .collect();
    if !rest.is_empty() || !escaped.is_empty() || !created_dirs.is_empty() {
        let owner = calls
            .iter()
            .find(|(_, l)| l.is_empty())
            .map(|(id, _)| id.clone());
        let mut record = base(owner, Some(rest));
        record.not_restored = escaped;
        record.created_dirs = created_dirs;
        out.push(record);
    }
    out
}
