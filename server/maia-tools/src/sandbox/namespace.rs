//! The namespaces of a sandboxed command: an unprivileged user namespace
//! (the user keeps its own uid), a private mount namespace and, when the
//! network is refused, a private network namespace whose loopback is up.
//!
//! In the mount namespace ([`Plan::new`] decides, [`Plan::enter`] does):
//! - `/tmp`, `/var/tmp` and `/dev/shm` become fresh writable tmpfs, private
//!   to the command (Landlock is told through a rule added in the child);
//! - `/run` (and `/var/run` when it is a folder, and `$XDG_RUNTIME_DIR`
//!   elsewhere) become empty read-only tmpfs, `$SSH_AUTH_SOCK` an empty
//!   file: the Unix sockets there cannot be reached;
//! - the roots, the temp folder and `sandbox.writable` under a covered
//!   folder are bound back at their place (`open_tree` before the cover,
//!   `move_mount` after), as are the parts of `/run` programs need;
//! - the secrets are covered by empty read-only folders or `/dev/null`;
//! - `.git` under each root is bound on itself (a mount point cannot be
//!   renamed or removed) and `.git/hooks`, `.git/config` and `.maia` are
//!   read-only mount points; a missing `.git/hooks` or `.maia` is made
//!   first, in the parent, so it cannot be made writable inside.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::libc;
use nix::mount::MsFlags;
use nix::sched::CloneFlags;

use super::{READ_ONLY_IN_ROOTS, SandboxError, SandboxMode, SandboxPolicy, Shared};

/// What stays under `/run` for programs to work (NixOS keeps its system
/// there).
const RUN_KEEP: &[&str] = &[
    "/run/current-system",
    "/run/booted-system",
    "/run/wrappers",
    "/run/opengl-driver",
    "/run/host",
];

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

/// `struct landlock_path_beneath_attr`.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

enum Kind {
    /// A fresh writable tmpfs.
    Private,
    /// An empty read-only tmpfs.
    Empty,
    /// `/dev/null`, read-only.
    File,
}

/// A path covered in the mount namespace.
struct Cover {
    target: CString,
    kind: Kind,
    /// Paths under `target` bound back after the cover.
    keeps: Vec<Keep>,
    /// Flags kept on a read-only remount (those of `/dev` for `File`).
    locked: MsFlags,
    /// Skipped when the target no longer exists (under an earlier cover).
    optional: bool,
}

struct Keep {
    path: CString,
    /// Folders to make under the cover first, outermost first.
    make: Vec<CString>,
    file: bool,
}

/// Everything the child does to enter its namespaces, built before the fork.
pub(super) struct Plan {
    flags: CloneFlags,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    loopback: bool,
    covers: Vec<Cover>,
    self_binds: Vec<CString>,
    read_only: Vec<(CString, MsFlags)>,
    /// The Landlock ruleset and the write rights to grant beneath the
    /// private tmpfs.
    grant: Option<(OwnedFd, u64)>,
    /// Scratch space for `open_tree` descriptors (never grows in the child).
    trees: Vec<libc::c_int>,
    /// The covered paths (in the parent, while planning).
    covered: Vec<PathBuf>,
    /// Namespaces to join instead of making new ones (the session's).
    join: Option<Arc<Shared>>,
    /// Leave a socket listening at 127.0.0.1 on descriptor 3 (the proxy's,
    /// made by the namespace holder).
    listen: bool,
    /// Room for the working folder, which is looked up again once the
    /// mounts are made (the one set before `pre_exec` still points into
    /// the mounts as they were: through it the covers would not hold).
    cwd: Vec<u8>,
}

/// Makes the user (and, with `network` false, network) namespace a
/// session's commands join: cheaper per command than making new ones (a
/// network namespace costs milliseconds). A child makes them and blocks on
/// its stdin while they are opened through `/proc`.
pub(super) fn shared(
    network: bool,
    proxy: bool,
) -> std::io::Result<(Shared, Option<std::net::TcpListener>)> {
    use std::os::unix::process::CommandExt;
    let mut plan = Plan::bare(!network);
    plan.listen = proxy && !network;
    let mut holder = std::process::Command::new("/bin/cat");
    // SAFETY: the closure only makes async-signal-safe system calls on data
    // prepared before the fork (see `Plan::enter`).
    #[allow(unsafe_code)]
    unsafe {
        holder.pre_exec(move || plan.enter());
    }
    let mut child = holder
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let open = |kind: &str| {
        std::fs::File::open(format!("/proc/{}/ns/{kind}", child.id())).map(OwnedFd::from)
    };
    let made = (|| {
        let shared = Shared {
            user: open("user")?,
            net: if network { None } else { Some(open("net")?) },
            proxy_port: std::sync::OnceLock::new(),
        };
        let listener = if proxy && !network {
            Some(take_fd_3(child.id())?)
        } else {
            None
        };
        Ok((shared, listener))
    })();
    drop(child.stdin.take());
    let _ = child.wait();
    made
}

/// In the holder: a TCP socket listening at 127.0.0.1 (any port) in its
/// network namespace, on descriptor 3 (kept across exec).
#[allow(unsafe_code)]
fn listen_on_3() -> std::io::Result<()> {
    // SAFETY: plain socket calls on a zeroed, filled-in address.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        if s < 0 {
            return Err(last_error());
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(s, (&addr as *const libc::sockaddr_in).cast(), len) != 0
            || libc::listen(s, 128) != 0
            || (s != 3 && libc::dup2(s, 3) != 3)
        {
            return Err(last_error());
        }
        if s != 3 {
            libc::close(s);
        }
    }
    Ok(())
}

/// Takes descriptor 3 of the holder `pid` (`pidfd_getfd`, Linux 5.6).
#[allow(unsafe_code)]
fn take_fd_3(pid: u32) -> std::io::Result<std::net::TcpListener> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open and pidfd_getfd return new descriptors (or -1),
    // owned from here on.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0);
        if pidfd < 0 {
            return Err(last_error());
        }
        let pidfd = OwnedFd::from_raw_fd(pidfd as libc::c_int);
        let fd = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), 3, 0);
        if fd < 0 {
            return Err(last_error());
        }
        Ok(std::net::TcpListener::from_raw_fd(fd as libc::c_int))
    }
}

/// Tries once, in a child, whether the namespaces can be made.
pub(super) fn probe(network: bool) -> bool {
    use std::os::unix::process::CommandExt;
    let mut plan = Plan::bare(network);
    let mut probe = std::process::Command::new("/bin/true");
    // SAFETY: the closure only makes async-signal-safe system calls on data
    // prepared before the fork (see `Plan::enter`).
    #[allow(unsafe_code)]
    unsafe {
        probe.pre_exec(move || plan.enter());
    }
    probe
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn cstring(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| SandboxError::Setup(format!("{}: a NUL in the path", path.display())))
}

/// A folder that is not a symbolic link.
fn real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

impl Plan {
    fn bare(network: bool) -> Self {
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
    pub(super) fn new(
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

    /// In the child (or a single-threaded process about to exec): enters
    /// the namespaces and sets up the mounts. Allocates nothing.
    #[allow(unsafe_code)]
    pub(super) fn enter(&mut self) -> std::io::Result<()> {
        // SAFETY: the buffer is writable for its whole length.
        let cwd = unsafe { libc::getcwd(self.cwd.as_mut_ptr().cast(), self.cwd.len()) };
        if cwd.is_null() {
            return Err(last_error());
        }
        if let Some(shared) = &self.join {
            // SAFETY: descriptors of namespaces the sandbox keeps open.
            let joined = |fd: &OwnedFd, kind: libc::c_int| unsafe {
                if libc::setns(fd.as_raw_fd(), kind) != 0 {
                    Err(last_error())
                } else {
                    Ok(())
                }
            };
            joined(&shared.user, libc::CLONE_NEWUSER)?;
            if let Some(net) = &shared.net {
                joined(net, libc::CLONE_NEWNET)?;
            }
            nix::sched::unshare(CloneFlags::CLONE_NEWNS)?;
        } else {
            nix::sched::unshare(self.flags)?;
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", &self.uid_map)?;
            write_file(c"/proc/self/gid_map", &self.gid_map)?;
            if self.loopback {
                // Without it the command only lacks a loopback; not fatal.
                let _ = loopback_up();
            }
            if self.listen {
                listen_on_3()?;
            }
        }
        mount(
            None,
            c"/",
            None,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None,
        )?;
        let grant = self
            .grant
            .as_ref()
            .map(|(fd, access)| (fd.as_raw_fd(), *access));
        for cover in &self.covers {
            apply_cover(cover, &mut self.trees, grant)?;
        }
        for path in &self.self_binds {
            let path = path.as_c_str();
            mount(
                Some(path),
                path,
                None,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None,
            )?;
        }
        for (path, locked) in &self.read_only {
            let path = path.as_c_str();
            mount(
                Some(path),
                path,
                None,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None,
            )?;
            read_only(path, *locked)?;
        }
        // SAFETY: getcwd left a NUL-terminated path in the buffer.
        if unsafe { libc::chdir(self.cwd.as_ptr().cast()) } != 0 {
            return Err(last_error());
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

fn last_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn close_all(fds: &[libc::c_int]) {
    for fd in fds {
        // SAFETY: descriptors this child opened with open_tree.
        #[allow(unsafe_code)]
        unsafe {
            libc::close(*fd);
        }
    }
}

/// Covers one path, binding its keeps back; a rule in the ruleset for a
/// private tmpfs.
#[allow(unsafe_code)]
fn apply_cover(
    cover: &Cover,
    trees: &mut Vec<libc::c_int>,
    grant: Option<(libc::c_int, u64)>,
) -> std::io::Result<()> {
    trees.clear();
    for keep in &cover.keeps {
        // SAFETY: a NUL-terminated path; flags as documented for open_tree(2).
        let fd = unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                keep.path.as_ptr(),
                OPEN_TREE_CLONE
                    | libc::O_CLOEXEC as libc::c_uint
                    | libc::AT_RECURSIVE as libc::c_uint,
            )
        };
        if fd < 0 {
            let e = last_error();
            close_all(trees);
            return Err(e);
        }
        trees.push(fd as libc::c_int);
    }
    let target = cover.target.as_c_str();
    let covered = match cover.kind {
        Kind::Private => mount(
            Some(c"tmpfs"),
            target,
            Some(c"tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(c"mode=1777"),
        ),
        Kind::Empty => mount(
            Some(c"tmpfs"),
            target,
            Some(c"tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(c"mode=755"),
        ),
        Kind::File => mount(Some(c"/dev/null"), target, None, MsFlags::MS_BIND, None),
    };
    if let Err(e) = covered {
        close_all(trees);
        if cover.optional && e.raw_os_error() == Some(libc::ENOENT) {
            return Ok(());
        }
        return Err(e);
    }
    for (i, keep) in cover.keeps.iter().enumerate() {
        let fd = trees[i];
        let moved = (|| {
            for dir in &keep.make {
                // SAFETY: a NUL-terminated path.
                if unsafe { libc::mkdir(dir.as_ptr(), 0o755) } != 0
                    && std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST)
                {
                    return Err(last_error());
                }
            }
            if keep.file {
                // SAFETY: a NUL-terminated path; the descriptor is closed at once.
                let f = unsafe {
                    libc::open(
                        keep.path.as_ptr(),
                        libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o600,
                    )
                };
                if f < 0 {
                    return Err(last_error());
                }
                // SAFETY: the descriptor just opened.
                unsafe { libc::close(f) };
            }
            // SAFETY: `fd` is a detached tree from open_tree; the path is
            // NUL-terminated; the empty path goes with F_EMPTY_PATH.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_move_mount,
                    fd,
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    keep.path.as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                )
            };
            if r != 0 { Err(last_error()) } else { Ok(()) }
        })();
        if let Err(e) = moved {
            close_all(&trees[i..]);
            return Err(e);
        }
        close_all(&trees[i..=i]);
    }
    match cover.kind {
        Kind::Empty | Kind::File => read_only(target, cover.locked)?,
        // Writable only when nothing is bound back beneath: Landlock looks
        // at the whole path up to the root, so a grant here would make the
        // roots under it writable in every mode, `.git` included.
        Kind::Private if !cover.keeps.is_empty() => {}
        Kind::Private => {
            if let Some((ruleset, access)) = grant {
                // SAFETY: a NUL-terminated path; the descriptor is closed below.
                let dir = unsafe {
                    libc::open(
                        target.as_ptr(),
                        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    )
                };
                if dir < 0 {
                    return Err(last_error());
                }
                let attr = PathBeneathAttr {
                    allowed_access: access,
                    parent_fd: dir,
                };
                // SAFETY: the attribute lives across the call; the ruleset
                // descriptor is a copy of the one restrict_self uses.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_landlock_add_rule,
                        ruleset,
                        LANDLOCK_RULE_PATH_BENEATH,
                        &attr as *const PathBeneathAttr,
                        0,
                    )
                };
                let e = last_error();
                // SAFETY: the descriptor opened above.
                unsafe { libc::close(dir) };
                if r != 0 {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: MsFlags,
    data: Option<&CStr>,
) -> std::io::Result<()> {
    Ok(nix::mount::mount(source, target, fstype, flags, data)?)
}

fn read_only(path: &CStr, locked: MsFlags) -> std::io::Result<()> {
    mount(
        None,
        path,
        None,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | locked,
        None,
    )
}

fn write_file(path: &CStr, data: &[u8]) -> std::io::Result<()> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::Mode;
    use std::os::fd::AsFd;
    let fd = open(path, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty())?;
    nix::unistd::write(fd.as_fd(), data)?;
    Ok(())
}

/// Sets the loopback of the new network namespace up.
#[allow(unsafe_code)]
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: a socket used only for two ioctls on a zeroed, NUL-terminated
    // `ifreq`, closed before returning.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(last_error());
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        ifr.ifr_name[0] = b'l' as libc::c_char;
        ifr.ifr_name[1] = b'o' as libc::c_char;
        let mut r = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut ifr);
        if r == 0 {
            ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            r = libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr);
        }
        let e = last_error();
        libc::close(s);
        if r != 0 { Err(e) } else { Ok(()) }
    }
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
