//! The shadow repository: a git repository of MAIA's own at
//! `<cwd>/.maia/.sessions/.checkpoints/`, driven by the `git` binary, whose
//! work tree is the project and whose index is one file per session. It
//! never reads or writes the user's own `.git`: every command names its
//! `--git-dir` and `--work-tree`, sets `GIT_DIR` and `GIT_INDEX_FILE`, and
//! drops the `GIT_*` variables MAIA was started with; system and global
//! configuration are off (no user filters, LFS, hooks or fsmonitor).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;

/// Environment variables of git's that would point a command elsewhere
/// (removed from every command MAIA runs here).
const GIT_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_GLOBAL",
    "GIT_ATTR_NOSYSTEM",
    "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR",
    "GIT_OPTIONAL_LOCKS",
    "GIT_TRACE",
    "GIT_REPLACE_REF_BASE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_SHALLOW_FILE",
    "GIT_LITERAL_PATHSPECS",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
];

/// Configuration every command runs with.
const CONFIG: &[&str] = &[
    "core.autocrlf=false",
    "core.fileMode=true",
    "core.symlinks=true",
    "core.safecrlf=false",
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.quotePath=false",
    "core.bigFileThreshold=512m",
    "gc.auto=0",
    // No SHA-1 over the whole index on each write (git >= 2.40; older
    // versions ignore it): about 20 ms a write at 50,000 files.
    "index.skipHash=true",
    "advice.addEmbeddedRepo=false",
    "advice.addIgnoredFile=false",
];

/// Why the store could not do something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitError {
    /// `git` is not on `PATH` (or cannot be started).
    #[error("git cannot be run ({0}); checkpoints need the git program on PATH")]
    Missing(String),
    /// A git command failed.
    #[error("`git {command}` failed: {message}")]
    Failed { command: String, message: String },
}

/// One entry of a tree difference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The path, relative to the work tree, with `/`.
    pub path: String,
    pub before: Option<Blob>,
    pub after: Option<Blob>,
}

/// A file as a tree holds it: its git mode (`100644`, `100755`,
/// `120000`) and its blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    pub mode: u32,
    pub sha: String,
}

/// The shadow repository of one project, as one session uses it.
#[derive(Debug, Clone)]
pub struct Repo {
    pub git_dir: PathBuf,
    pub work_tree: PathBuf,
    pub index: PathBuf,
}

impl Repo {
    /// The store of `cwd` in its sessions folder, with `session`'s index.
    pub fn new(sessions: &Path, cwd: &Path, session: &str) -> Self {
        let git_dir = sessions.join(".checkpoints");
        let index = git_dir.join("indexes").join(format!("{session}.index"));
        Repo {
            git_dir,
            work_tree: cwd.to_path_buf(),
            index,
        }
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = maia_tools::process::command("git");
        for name in GIT_ENV {
            cmd.env_remove(name);
        }
        cmd.env("GIT_DIR", &self.git_dir)
            .env("GIT_WORK_TREE", &self.work_tree)
            .env("GIT_INDEX_FILE", &self.index)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("LC_ALL", "C");
        for config in CONFIG {
            cmd.arg("-c").arg(config);
        }
        cmd.arg("--git-dir")
            .arg(&self.git_dir)
            .arg("--work-tree")
            .arg(&self.work_tree)
            .args(args)
            .current_dir(&self.work_tree)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs `git ARGS` with `input` on its standard input; its output.
    pub async fn run(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, GitError> {
        let mut cmd = self.command(args);
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let failed = |message: String| GitError::Failed {
            command: args.join(" "),
            message,
        };
        maia_tools::process::ensure_runnable(std::ffi::OsStr::new("git"), None)
            .map_err(|e| GitError::Missing(e.to_string()))?;
        let mut child = cmd.spawn().map_err(|e| GitError::Missing(e.to_string()))?;
        if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
            let bytes = bytes.to_vec();
            // Written beside the read of the output, so a large output
            // cannot block the write.
            tokio::spawn(async move {
                let _ = stdin.write_all(&bytes).await;
            });
        }
        let output = child
            .wait_with_output()
            .await
            .map_err(|e| failed(e.to_string()))?;
        if !output.status.success() {
            return Err(failed(
                String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            ));
        }
        Ok(output.stdout)
    }

    /// Creates the repository when it does not exist yet (`info/exclude`
    /// keeps MAIA's own folder out).
    pub async fn ensure(&self) -> Result<(), GitError> {
        if !self.git_dir.join("HEAD").is_file() {
            std::fs::create_dir_all(&self.git_dir).map_err(|e| GitError::Failed {
                command: "init".into(),
                message: format!("cannot create {}: {e}", self.git_dir.display()),
            })?;
            self.run(&["init", "--quiet"], None).await?;
        }
        let exclude = self.git_dir.join("info").join("exclude");
        let wanted = "/.maia/.sessions/\n";
        if std::fs::read_to_string(&exclude).ok().as_deref() != Some(wanted) {
            let io = |e: std::io::Error| GitError::Failed {
                command: "init".into(),
                message: format!("cannot write {}: {e}", exclude.display()),
            };
            std::fs::create_dir_all(self.git_dir.join("info")).map_err(io)?;
            std::fs::write(&exclude, wanted).map_err(io)?;
        }
        if let Some(parent) = self.index.parent() {
            std::fs::create_dir_all(parent).map_err(|e| GitError::Failed {
                command: "init".into(),
                message: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// Stages the whole work tree (except `skip`, files over the size
    /// bound; with `ignored`, files the user's ignore rules leave out but
    /// that are captured all the same) into the session's index and writes
    /// it as a tree.
    pub async fn snapshot(&self, skip: &[String], ignored: &[String]) -> Result<String, GitError> {
        if !ignored.is_empty() {
            let mut spec = String::new();
            for path in ignored {
                spec.push_str(":(literal)");
                spec.push_str(path);
                spec.push('\0');
            }
            self.run(
                &[
                    "add",
                    "-f",
                    "--ignore-errors",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                Some(spec.as_bytes()),
            )
            .await?;
        }
        if skip.is_empty() {
            self.run(&["add", "-A", "--ignore-errors", "--", "."], None)
                .await?;
        } else {
            let mut spec = String::from(".\0");
            for path in skip {
                spec.push_str(":(exclude,literal)");
                spec.push_str(path);
                spec.push('\0');
            }
            self.run(
                &[
                    "add",
                    "-A",
                    "--ignore-errors",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                Some(spec.as_bytes()),
            )
            .await?;
            // Tracked from an earlier snapshot, when they were smaller.
            let mut spec = String::new();
            for path in skip {
                spec.push_str(":(literal)");
                spec.push_str(path);
                spec.push('\0');
            }
            self.run(
                &[
                    "rm",
                    "--cached",
                    // The shadow repository has no commit: without it, a
                    // file that grew past the bound since it was staged
                    // is refused ("staged content different").
                    "-f",
                    "-r",
                    "-q",
                    "--ignore-unmatch",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                Some(spec.as_bytes()),
            )
            .await?;
        }
        let tree = self.run(&["write-tree"], None).await?;
        Ok(String::from_utf8_lossy(&tree).trim().to_owned())
    }

    /// Stages only the changed units of a [`Delta`](super::delta::Delta)
    /// into the session's index (the index holds the latest snapshot) and
    /// writes it as a tree: what [`Repo::snapshot`] would stage, for those
    /// paths.
    pub async fn update(&self, delta: &super::delta::Delta) -> Result<String, GitError> {
        let spec = |paths: &[String], magic: &str| {
            let mut spec = String::new();
            for path in paths {
                spec.push_str(magic);
                spec.push_str(path);
                spec.push('\0');
            }
            spec
        };
        let from_file = ["--pathspec-from-file=-", "--pathspec-file-nul"];
        if !delta.forced.is_empty() {
            let input = spec(&delta.forced, ":(literal)");
            let args = [&["add", "-f", "--ignore-errors"][..], &from_file].concat();
            self.run(&args, Some(input.as_bytes())).await?;
        }
        // Tracked entries under what git's rules leave out: `git add -A`
        // keeps them up to date; named, they are updated with `-u` (`-A`
        // would refuse an ignored folder they are in).
        let mut tracked = Vec::new();
        if !delta.other.is_empty() {
            // (`ls-files` reads no pathspec file; at most `watch::MAX_PATHS`.)
            let mut args = vec!["ls-files".to_owned(), "-z".into(), "--".into()];
            args.extend(delta.other.iter().map(|p| format!(":(literal){p}")));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = self.run(&args, None).await?;
            tracked = out
                .split(|b| *b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
        }
        for (paths, mode) in [(&delta.held, "-A"), (&tracked, "-u")] {
            if paths.is_empty() {
                continue;
            }
            let mut input = spec(paths, ":(literal)");
            // Excluded: only what is left out under the paths staged. An
            // exclude naming a nested repository beside them made `add -A`
            // stage none of them (the property test's saved case).
            let under = |skip: &&String| {
                paths.iter().any(|p| {
                    skip.strip_prefix(p.as_str())
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                })
            };
            let skip: Vec<String> = delta.skip.iter().filter(under).cloned().collect();
            input.push_str(&spec(&skip, ":(exclude,literal)"));
            let args = [&["add", mode, "--ignore-errors"][..], &from_file].concat();
            self.run(&args, Some(input.as_bytes())).await?;
        }
        let gone: Vec<String> = delta.gone.iter().chain(&delta.skip).cloned().collect();
        if !gone.is_empty() {
            let input = spec(&gone, ":(literal)");
            let args = [
                &["rm", "--cached", "-f", "-r", "-q", "--ignore-unmatch"][..],
                &from_file,
            ]
            .concat();
            self.run(&args, Some(input.as_bytes())).await?;
        }
        let tree = self.run(&["write-tree"], None).await?;
        Ok(String::from_utf8_lossy(&tree).trim().to_owned())
    }

    /// Keeps `tree` reachable as `refs/maia/<session>/<n>`.
    pub async fn keep(&self, session: &str, n: u64, tree: &str) -> Result<(), GitError> {
        let name = format!("refs/maia/{session}/{n}");
        self.run(&["update-ref", &name, tree], None).await?;
        Ok(())
    }

    /// Whether `tree` is in the store.
    pub async fn has(&self, tree: &str) -> bool {
        self.git_dir.join("HEAD").is_file()
            && self
                .run(&["cat-file", "-e", &format!("{tree}^{{tree}}")], None)
                .await
                .is_ok()
    }

    /// The files that differ between two trees.
    pub async fn diff(&self, before: &str, after: &str) -> Result<Vec<Change>, GitError> {
        let out = self
            .run(
                &[
                    "diff-tree",
                    "-r",
                    "-z",
                    "--no-renames",
                    "--raw",
                    before,
                    after,
                ],
                None,
            )
            .await?;
        Ok(parse_raw(&out))
    }

    /// The entries of `paths` in `tree`.
    pub async fn entries(
        &self,
        tree: &str,
        paths: &[String],
    ) -> Result<HashMap<String, Blob>, GitError> {
        let mut args = vec![
            "ls-tree".to_owned(),
            "-r".into(),
            "-z".into(),
            tree.into(),
            "--".into(),
        ];
        args.extend(paths.iter().map(|p| format!(":(literal){p}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.run(&args, None).await?;
        let mut entries = HashMap::new();
        for line in out.split(|b| *b == 0).filter(|l| !l.is_empty()) {
            let line = String::from_utf8_lossy(line);
            let Some((meta, path)) = line.split_once('\t') else {
                continue;
            };
            let fields: Vec<&str> = meta.split(' ').collect();
            if let (Some(mode), Some(sha)) = (fields.first(), fields.get(2))
                && let Ok(mode) = u32::from_str_radix(mode, 8)
            {
                entries.insert(
                    path.to_owned(),
                    Blob {
                        mode,
                        sha: (*sha).to_owned(),
                    },
                );
            }
        }
        Ok(entries)
    }

    /// The contents of blobs, by sha.
    pub async fn blobs(&self, shas: &[String]) -> Result<HashMap<String, Vec<u8>>, GitError> {
        let mut out = HashMap::new();
        if shas.is_empty() {
            return Ok(out);
        }
        let input = shas.join("\n") + "\n";
        let bytes = self
            .run(&["cat-file", "--batch"], Some(input.as_bytes()))
            .await?;
        let mut rest = bytes.as_slice();
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
            rest = &rest[nl + 1..];
            let fields: Vec<&str> = header.split(' ').collect();
            let (Some(sha), Some(size)) = (fields.first(), fields.get(2)) else {
                continue; // `<sha> missing`
            };
            let Ok(size) = size.parse::<usize>() else {
                continue;
            };
            if rest.len() < size {
                break;
            }
            out.insert((*sha).to_owned(), rest[..size].to_vec());
            rest = rest.get(size + 1..).unwrap_or_default();
        }
        Ok(out)
    }

    /// Forgets the session's snapshots: its refs and its index (the
    /// objects go at the next prune).
    pub async fn forget(&self, session: &str) -> Result<(), GitError> {
        let _ = std::fs::remove_file(&self.index);
        if !self.git_dir.join("HEAD").is_file() {
            return Ok(());
        }
        let prefix = format!("refs/maia/{session}/");
        let refs = self
            .run(&["for-each-ref", "--format=%(refname)", &prefix], None)
            .await?;
        let mut input = String::new();
        for name in String::from_utf8_lossy(&refs).lines() {
            input.push_str(&format!("delete {name}\n"));
        }
        if !input.is_empty() {
            self.run(&["update-ref", "--stdin"], Some(input.as_bytes()))
                .await?;
        }
        // Objects of another session's snapshot in progress are young.
        self.run(&["prune", "--expire=1.hour.ago"], None).await?;
        Ok(())
    }
}

/// `git diff-tree -r -z --raw` output: `:old new oldsha newsha status\0path\0`.
fn parse_raw(out: &[u8]) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut parts = out.split(|b| *b == 0).filter(|p| !p.is_empty());
    while let (Some(meta), Some(path)) = (parts.next(), parts.next()) {
        let meta = String::from_utf8_lossy(meta);
        let fields: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        if fields.len() < 5 {
            continue;
        }
        let blob = |mode: &str, sha: &str| {
            let mode = u32::from_str_radix(mode, 8).ok()?;
            (mode != 0).then(|| Blob {
                mode,
                sha: sha.to_owned(),
            })
        };
        changes.push(Change {
            path: String::from_utf8_lossy(path).into_owned(),
            before: blob(fields[0], fields[2]),
            after: blob(fields[1], fields[3]),
        });
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_diff_output_is_parsed() {
        let out =
            b":100644 000000 aaaa 0000 D\0gone.txt\0:000000 100755 0000 bbbb A\0new dir/x.sh\0";
        let changes = parse_raw(out);
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].path, "gone.txt");
        assert!(changes[0].after.is_none());
        assert_eq!(changes[1].after.as_ref().map(|b| b.mode), Some(0o100755));
        assert_eq!(changes[1].path, "new dir/x.sh");
    }
}
