//! Entering the namespaces, in the child between fork and exec: joining
//! the session's namespaces or making new ones (uid and gid maps, the
//! loopback, the proxy's listening socket), then the planned mounts
//! (covers, keeps bound back, read-only mount points) and the Landlock
//! rules for the private tmpfs. Only async-signal-safe system calls on
//! data prepared before the fork.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::libc;
use nix::mount::MsFlags;
use nix::sched::CloneFlags;

use super::{Cover, Kind, Plan};

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

/// `struct landlock_path_beneath_attr`.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
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
impl Plan {
    /// In the child (or a single-threaded process about to exec): enters
    /// the namespaces and sets up the mounts. Allocates nothing.
    #[allow(unsafe_code)]
    pub(in crate::sandbox) fn enter(&mut self) -> std::io::Result<()> {
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
pub(super) fn last_error() -> std::io::Error {
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
