//! What a batch's commands changed on disk, told as file states
//! ([`Event::FilesChanged`]): deletes, renames, mode changes and binaries
//! included, which MAIA's own file tools never make and their diffs cannot
//! say. Read from the two snapshots the checkpoints took around the batch
//! (the shadow repository's public [`git::Repo::run`], with git's rename
//! detection), for the checkpoint record that holds the changes no call
//! named ([`crate::checkpoint::records_of_batch`] gives them to the batch's first
//! call that names no path: the command). A child of `session`, like
//! `files`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::checkpoint::{Checkpoint, Snapshot, git};
use crate::event::{Event, FileChange, FileOperation};
use crate::session::Session;

/// A patch longer than this is left out (the changes are still listed).
const MAX_PATCH_BYTES: usize = 1024 * 1024;

/// One entry of `diff-tree --raw -z -M`: status letter, modes, paths.
#[derive(Debug, PartialEq, Eq)]
struct Raw {
    status: char,
    old_mode: u32,
    new_mode: u32,
    from: Option<String>,
    path: String,
}

fn parse_raw(out: &[u8]) -> Vec<Raw> {
    let mut parts = out.split(|b| *b == 0).filter(|p| !p.is_empty());
    let mut entries = Vec::new();
    while let Some(meta) = parts.next() {
        let meta = String::from_utf8_lossy(meta);
        let fields: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let (Some(old), Some(new), Some(status)) = (fields.first(), fields.get(1), fields.get(4))
        else {
            break;
        };
        let status = status.chars().next().unwrap_or('M');
        let first = parts
            .next()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        let (from, path) = if matches!(status, 'R' | 'C') {
            let second = parts
                .next()
                .map(|p| String::from_utf8_lossy(p).into_owned());
            (first, second)
        } else {
            (None, first)
        };
        let Some(path) = path else { break };
        entries.push(Raw {
            status,
            old_mode: u32::from_str_radix(old, 8).unwrap_or(0),
            new_mode: u32::from_str_radix(new, 8).unwrap_or(0),
            from,
            path,
        });
    }
    entries
}

/// The paths `diff-tree --numstat -z -M` counts as binary (`-` lines).
fn parse_binary(out: &[u8]) -> Vec<String> {
    let mut parts = out.split(|b| *b == 0).filter(|p| !p.is_empty());
    let mut binary = Vec::new();
    while let Some(part) = parts.next() {
        let part = String::from_utf8_lossy(part);
        let mut fields = part.splitn(3, '\t');
        let (added, _, path) = (fields.next(), fields.next(), fields.next().unwrap_or(""));
        let path = if path.is_empty() {
            // A rename: the source, then the destination.
            let _from = parts.next();
            parts
                .next()
                .map(|p| String::from_utf8_lossy(p).into_owned())
        } else {
            Some(path.to_owned())
        };
        if added == Some("-")
            && let Some(path) = path
        {
            binary.push(path);
        }
    }
    binary
}

/// `patch` with the paths of its `rename`/`copy` `from`/`to` lines (which
/// git writes relative, without the prefixes) under `root` as well.
fn absolute_renames(patch: &str, root: &str) -> String {
    let mut out = String::with_capacity(patch.len());
    for line in patch.split_inclusive('\n') {
        let head = ["rename from ", "rename to ", "copy from ", "copy to "]
            .into_iter()
            .find(|h| line.starts_with(h));
        match head {
            Some(head) => {
                let path = &line[head.len()..];
                match path.strip_prefix('"') {
                    Some(quoted) => out.push_str(&format!("{head}\"{root}/{quoted}")),
                    None => out.push_str(&format!("{head}{root}/{path}")),
                }
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Git's mode of a file with `bits` kept beside the tree (a regular file).
fn full_mode(bits: u32) -> u32 {
    0o100000 | (bits & 0o7777)
}

/// The file states of every path that differs but `except` between the
/// two snapshots of the shadow repository `repo`, whose work tree is
/// `cwd`; with the git patch, paths absolute (`a/` and `b/` before the
/// absolute path without its leading `/`, as `git diff` shows them).
/// `except` are the paths other calls of the batch named (a few), given to
/// git as exclusions: the command's own can be every file of a project
/// (an `npm install`), too many for a command line.
async fn file_states(
    repo: &git::Repo,
    cwd: &Path,
    (before, after): (&Snapshot, &Snapshot),
    except: &BTreeSet<&str>,
) -> Result<(Vec<FileChange>, Option<String>), git::GitError> {
    let spec: Vec<String> = except
        .iter()
        .map(|p| format!(":(exclude,literal){p}"))
        .collect();
    let run = |options: Vec<String>| {
        let mut args: Vec<String> = vec!["diff-tree".into(), "-r".into(), "-M".into()];
        args.extend(options);
        args.extend([before.tree.clone(), after.tree.clone(), "--".into()]);
        args.extend(spec.iter().cloned());
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            repo.run(&args, None).await
        }
    };
    let raw = parse_raw(&run(vec!["-z".into(), "--raw".into()]).await?);
    let binary = parse_binary(&run(vec!["-z".into(), "--numstat".into()]).await?);
    let root = cwd.to_string_lossy();
    let root = root.trim_start_matches('/');
    let mut patch = String::from_utf8_lossy(
        &run(vec![
            "-p".into(),
            format!("--src-prefix=a/{root}/"),
            format!("--dst-prefix=b/{root}/"),
        ])
        .await?,
    )
    .into_owned();
    patch = absolute_renames(&patch, root);
    let absolute = |p: &str| cwd.join(p);
    let mut changes: Vec<FileChange> = raw
        .iter()
        .map(|r| {
            let operation = match (r.status, &r.from) {
                ('A', _) | ('C', _) => FileOperation::Added,
                ('D', _) => FileOperation::Deleted,
                ('R', Some(from)) => FileOperation::Moved {
                    from: absolute(from),
                },
                _ => FileOperation::Modified,
            };
            let mode = if r.status == 'D' {
                r.old_mode
            } else {
                r.new_mode
            };
            FileChange {
                path: absolute(&r.path),
                operation,
                binary: binary.contains(&r.path),
                symlink: mode == 0o120000,
            }
        })
        .collect();
    // Modes git does not keep (not 644/755): a change of mode only.
    let (old_modes, new_modes) = (before.modes(), after.modes());
    let mut odd: BTreeMap<&String, ()> = BTreeMap::new();
    for path in old_modes.keys().chain(new_modes.keys()) {
        let wanted = !except.contains(path.as_str());
        if wanted
            && old_modes.get(path) != new_modes.get(path)
            && !raw.iter().any(|r| &r.path == path)
        {
            odd.insert(path, ());
        }
    }
    if !odd.is_empty() {
        let listed: Vec<String> = odd.keys().map(|p| (*p).clone()).collect();
        let (was, is) = (
            repo.entries(&before.tree, &listed).await?,
            repo.entries(&after.tree, &listed).await?,
        );
        for path in listed {
            let mode = |kept: Option<&u32>, tree: Option<&git::Blob>| {
                kept.map(|b| full_mode(*b)).or(tree.map(|b| b.mode))
            };
            let (Some(old), Some(new)) = (
                mode(old_modes.get(&path), was.get(&path)),
                mode(new_modes.get(&path), is.get(&path)),
            ) else {
                continue;
            };
            patch.push_str(&format!(
                "diff --git a/{root}/{path} b/{root}/{path}\nold mode {old:o}\nnew mode {new:o}\n"
            ));
            changes.push(FileChange {
                path: absolute(&path),
                operation: FileOperation::Modified,
                binary: false,
                symlink: false,
            });
        }
    }
    let patch = (!patch.is_empty() && patch.len() <= MAX_PATCH_BYTES).then_some(patch);
    Ok((changes, patch))
}

impl Session {
    /// Tells the file states of the records of one batch (`calls`: id,
    /// paths named) that belong to a call naming no path (a command's).
    pub(super) async fn tell_command_changes(
        &self,
        records: &[Checkpoint],
        calls: &[(String, Vec<PathBuf>)],
        snapshots: (&Snapshot, &Snapshot),
    ) {
        for record in records {
            let Some(id) = &record.tool_call_id else {
                continue;
            };
            let names_none = calls.iter().any(|(c, named)| c == id && named.is_empty());
            if !names_none {
                continue;
            }
            if record.paths.as_ref().is_some_and(Vec::is_empty) {
                continue;
            }
            // What the batch's other records hold is theirs.
            let except: BTreeSet<&str> = records
                .iter()
                .filter(|r| r.tool_call_id != record.tool_call_id)
                .flat_map(|r| r.paths.iter().flatten())
                .map(String::as_str)
                .collect();
            let repo = self.checkpoints.repo();
            let cwd = &self.services.cwd;
            match file_states(repo, cwd, snapshots, &except).await {
                Ok((changes, _)) if changes.is_empty() => {}
                Ok((changes, patch)) => self.emit(Event::FilesChanged {
                    tool_call_id: id.clone(),
                    changes,
                    patch,
                }),
                Err(e) => tracing::warn!("cannot tell what the command changed: {e}"),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn raw_entries_with_renames_are_read() {
        let out = b":100644 000000 a 0 D\0gone.txt\0:100644 100644 b b R100\0old.txt\0new.txt\0:100644 100755 c c M\0run.sh\0";
        let raw = parse_raw(out);
        assert_eq!(raw.len(), 3);
        assert_eq!(raw[0].status, 'D');
        assert_eq!(raw[1].from.as_deref(), Some("old.txt"));
        assert_eq!(raw[1].path, "new.txt");
        assert_eq!((raw[2].old_mode, raw[2].new_mode), (0o100644, 0o100755));
    }

    #[test]
    fn numstat_dashes_are_binaries() {
        let out = b"-\t-\tblob.bin\x001\t0\ttext.txt\0-\t-\t\0a.png\0b.png\0";
        assert_eq!(parse_binary(out), vec!["blob.bin", "b.png"]);
    }

    #[test]
    fn rename_lines_name_absolute_paths() {
        let patch = "diff --git a/p/x b/p/y\nrename from x\nrename to \"y z\"\n--- a/p/x\n";
        assert_eq!(
            absolute_renames(patch, "p"),
            "diff --git a/p/x b/p/y\nrename from p/x\nrename to \"p/y z\"\n--- a/p/x\n"
        );
    }

    #[test]
    fn kept_bits_are_a_regular_files_mode() {
        assert_eq!(full_mode(0o600), 0o100600);
    }
}
