//! Planning a sandboxed command's mount namespace, in the parent before
//! the fork: what is covered (and how), what is bound back under a cover,
//! the repositories' `.git` and `.maia` kept whole and read-only, and the
//! flags a read-only remount must keep. Everything the child needs is made
//! here, so that entering allocates nothing.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::libc;
use nix::mount::MsFlags;
use nix::sched::CloneFlags;

use super::super::{READ_ONLY_IN_ROOTS, SandboxError, SandboxMode, SandboxPolicy, Shared};
use super::{Cover, Keep, Kind, Plan};

/// What stays under `/run` for programs to work (NixOS keeps its system
/// there).
const RUN_KEEP: &[&str] = &[
    "/run/current-system",
    "/run/booted-system",
    "/run/wrappers",
    "/run/opengl-driver",
    "/run/host",
];
fn cstring(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| SandboxError::Setup(format!("{}: a NUL in the path", path.display())))
}

/// A folder that is not a symbolic link.
fn real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

impl Plan {
    pub(super) fn bare(network: bool) -> Self {
        let uid = nix::unistd::getuid();
        let gid = nix::unistd::getgid();
        let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
        if network {
            flags |= CloneFlags::CLONE_NEWNET;
        }
        Plan {
            flags,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            loopback: network,
            covers: Vec::new(),
            self_binds: Vec::new(),
            read_only: Vec::new(),
            grant: None,
            trees: Vec::new(),
            covered: Vec::new(),
            cwd: vec![0; libc::PATH_MAX as usize + 1],
            join: None,
            listen: false,
        }
    }

    /// The plan for `policy`; `netns`: a private network namespace;
    /// `join`: the session's namespaces (made by [`shared`]) to join.
    pub(in crate::sandbox) fn new(
        policy: &SandboxPolicy,
        netns: bool,
        grant: Option<(OwnedFd, u64)>,
        join: Option<Arc<Shared>>,
    ) -> Result<Self, SandboxError> {
        let mut plan = Plan::bare(netns);
        plan.grant = grant;
        plan.join = join;
        let keeps: Vec<PathBuf> = policy
            .roots
            .iter()
            .chain(&policy.writable)
            .chain(policy.temp_dir.iter())
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        let add = |plan: &mut Plan, target: &Path, kind: Kind, extra: &[PathBuf], secret: bool| {
            // A cover of the system's shared folders never hides a root or
            // a writable path (a secret is hidden even there).
            let optional = !matches!(kind, Kind::Private);
            if !secret && keeps.iter().any(|k| target.starts_with(k)) {
                return Ok(());
            }
            let locked = match kind {
                Kind::File => locked_flags(Path::new("/dev/null")),
                _ => MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            };
            let cover = Cover {
                target: cstring(target)?,
                kind,
                keeps: keeps_under(target, keeps.iter().chain(extra))?,
                locked,
                optional,
            };
            plan.covered.push(target.to_path_buf());
            plan.covers.push(cover);
            Ok::<(), SandboxError>(())
        };
        for tmp in ["/tmp", "/var/tmp", "/dev/shm"] {
            if real_dir(Path::new(tmp)) {
                add(&mut plan, Path::new(tmp), Kind::Private, &[], false)?;
            }
        }
        let mut run_keep: Vec<PathBuf> = RUN_KEEP
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect();
        if policy.network
            && let Ok(resolv) = std::fs::canonicalize("/etc/resolv.conf")
            && let Some(dir) = resolv.parent()
        {
            run_keep.push(dir.to_path_buf());
        }
        for run in ["/run", "/var/run"] {
            if real_dir(Path::new(run)) {
                add(&mut plan, Path::new(run), Kind::Empty, &run_keep, false)?;
            }
        }
        let under_cover = |p: &Path, plan: &Plan| plan.covered.iter().any(|c| p.starts_with(c));
        if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
            && runtime.is_absolute()
            && real_dir(&runtime)
            && !under_cover(&runtime, &plan)
        {
            add(&mut plan, &runtime, Kind::Empty, &[], false)?;
        }
        if let Some(agent) = std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from)
            && agent.is_absolute()
            && agent.exists()
            && !under_cover(&agent, &plan)
        {
            add(&mut plan, &agent, Kind::File, &[], false)?;
        }
        for secret in policy.hidden_paths() {
            match std::fs::metadata(&secret) {
                Ok(m) if m.is_dir() => add(&mut plan, &secret, Kind::Empty, &[], true)?,
                Ok(_) => add(&mut plan, &secret, Kind::File, &[], true)?,
                Err(_) => {}
            }
        }
        if policy.mode == SandboxMode::WorkspaceWrite {
            plan.protect_repositories(policy)?;
        }
        let most = plan.covers.iter().map(|c| c.keeps.len()).max().unwrap_or(0);
        plan.trees = Vec::with_capacity(most);
        Ok(plan)
    }

    /// `.git` and `.maia` under each writable root, as wholes.
    fn protect_repositories(&mut self, policy: &SandboxPolicy) -> Result<(), SandboxError> {
        for root in policy.roots.iter().chain(&policy.writable) {
            let git = root.join(".git");
            match std::fs::symlink_metadata(&git) {
                Ok(m) if m.is_dir() => {
                    // Made now, read-only inside: the command cannot plant hooks.
                    let _ = std::fs::create_dir(git.join("hooks"));
                    self.self_binds.push(cstring(&git)?);
                }
                // A worktree's `gitdir:` file: read-only, so it cannot be
                // pointed at a repository the command made.
                Ok(m) if m.is_file() => {
                    self.read_only.push((cstring(&git)?, locked_flags(&git)));
                }
                _ => {}
            }
            if policy.roots.contains(root) && !root.join(".maia").exists() && real_dir(root) {
                let _ = std::fs::create_dir(root.join(".maia"));
            }
            for rel in READ_ONLY_IN_ROOTS {
                let path = root.join(rel);
                if path.exists() {
                    self.read_only.push((cstring(&path)?, locked_flags(&path)));
                }
            }
        }
        Ok(())
    }
}

/// The keeps under `target`, without those under another keep.
fn keeps_under<'a>(
    target: &Path,
    keeps: impl Iterator<Item = &'a PathBuf>,
) -> Result<Vec<Keep>, SandboxError> {
    let inside: Vec<&PathBuf> = keeps
        .filter(|k| k.starts_with(target) && *k != target)
        .collect();
    let mut out = Vec::new();
    for (i, keep) in inside.iter().enumerate() {
        let nested = inside
            .iter()
            .enumerate()
            .any(|(j, other)| j != i && keep.starts_with(other) && (keep != other || j < i));
        if nested {
            continue;
        }
        let file = !keep.is_dir();
        let mut make = Vec::new();
        let mut dirs: Vec<&Path> = keep.ancestors().take_while(|a| *a != target).collect();
        dirs.reverse();
        for dir in dirs {
            if file && dir == keep.as_path() {
                continue;
            }
            make.push(cstring(dir)?);
        }
        out.push(Keep {
            path: cstring(keep)?,
            make,
            file,
        });
    }
    Ok(out)
}
/// The flags of the mount holding `path` that a user namespace may not
/// drop on remount (nosuid, nodev, noexec, atime).
fn locked_flags(path: &Path) -> MsFlags {
    use nix::sys::statvfs::{FsFlags, statvfs};
    let Ok(st) = statvfs(path) else {
        return MsFlags::empty();
    };
    let f = st.flags();
    let mut out = MsFlags::empty();
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if f.contains(fs) {
            out |= ms;
        }
    }
    out
}
