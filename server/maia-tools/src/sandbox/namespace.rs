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
//!
//! Here: the plan's shape and the session's shared namespaces (made by a
//! holder process, probed once); [`plan`] builds a plan in the parent,
//! [`enter`] carries it out in the child.

mod enter;
mod plan;

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use nix::libc;
use nix::mount::MsFlags;
use nix::sched::CloneFlags;

use super::Shared;
use enter::last_error;

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
