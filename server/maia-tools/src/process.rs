//! Child processes: started so that nothing they start outlives them or
//! MAIA, and killed as a whole.
//!
//! Every command MAIA runs (Bash, custom tools, stdio MCP servers) is built
//! with [`command`]. In the `maia` binary it runs under a *guard*: `maia`
//! itself re-executed as `maia __guard -- PROGRAM ARGS…` (see
//! [`crate::guard`]), which leads the process group, is a child subreaper
//! (so descendants that call `setsid` or double-fork come back to it) and
//! has a parent-death signal. When the command exits, when MAIA asks it to
//! stop, or when MAIA dies (even of `kill -9`), the guard kills every
//! descendant. Without a guard (unit tests of this crate) the child gets the
//! parent-death signal itself and [`GroupGuard`] kills its group.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::OnceLock;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The guard executable (the running `maia`), once set.
static GUARD: OnceLock<PathBuf> = OnceLock::new();

/// The argument that makes `maia` run as a guard.
pub const GUARD_ARG: &str = "__guard";

/// What to tell the user at the start of a session when commands cannot be
/// contained as on Linux (`None` on Linux): elsewhere the guard only runs
/// the command, so a descendant that leaves the process group, or every
/// descendant when MAIA is killed, may outlive it.
pub fn containment_note() -> Option<&'static str> {
    cfg!(not(target_os = "linux")).then_some(
        "Commands are stopped through their process group only: catching descendants that leave \
         it (setsid, double forks) and stopping commands when MAIA itself is killed work on \
         Linux only",
    )
}

/// Makes [`command`] run commands under `exe` (the `maia` binary), which
/// must answer `exe __guard -- PROGRAM ARGS…` with [`crate::guard::run`].
/// Call once at start; later calls are ignored.
pub fn set_guard(exe: PathBuf) {
    let _ = GUARD.set(exe);
}

/// The `maia` binary by its real path (another process can start it,
/// unlike the guard's `/proc/self/exe`), when commands run under a guard.
pub fn maia_exe() -> Option<PathBuf> {
    static EXE: OnceLock<Option<PathBuf>> = OnceLock::new();
    if !guarded() {
        return None;
    }
    EXE.get_or_init(|| std::env::current_exe().ok().filter(|p| p.is_file()))
        .clone()
}

/// Whether commands run under a guard.
pub fn guarded() -> bool {
    GUARD.get().is_some()
}

/// A command for `program`, in its own process group, that dies with MAIA:
/// under the guard when one is set, else with a parent-death signal. Add
/// arguments, environment and stdio as usual.
pub fn command(program: impl AsRef<OsStr>) -> tokio::process::Command {
    let mut cmd = match GUARD.get() {
        Some(guard) => {
            let mut cmd = tokio::process::Command::new(guard);
            cmd.arg(GUARD_ARG).arg("--").arg(program);
            cmd
        }
        None => tokio::process::Command::new(program),
    };
    cmd.process_group(0);
    // MAIA's own secrets (the LiteLLM key) never reach a command.
    for name in crate::sandbox::SECRET_ENV {
        cmd.env_remove(name);
    }
    // A guard must not be SIGKILLed when its `Child` is dropped: it gets
    // SIGTERM from [`GroupGuard`] and needs a moment to kill what it leads.
    // A bare command is killed on drop.
    cmd.kill_on_drop(!guarded());
    die_with_parent(&mut cmd);
    cmd
}

/// Fails as starting `program` would when it cannot be found or run, so a
/// command started under the guard (which reports such failures only as
/// its exit status) still fails clearly at spawn. A name without `/` is
/// looked up in `PATH`; a relative path is taken from `cwd`.
pub fn ensure_runnable(program: &OsStr, cwd: Option<&std::path::Path>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |path: &std::path::Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let path = std::path::Path::new(program);
    let found = if program.as_encoded_bytes().contains(&b'/') {
        let full = match cwd {
            Some(cwd) if path.is_relative() => cwd.join(path),
            _ => path.to_path_buf(),
        };
        if runnable(&full) {
            return Ok(());
        }
        full.exists()
    } else {
        let dirs = std::env::var_os("PATH").unwrap_or_default();
        if std::env::split_paths(&dirs).any(|dir| runnable(&dir.join(path))) {
            return Ok(());
        }
        false
    };
    Err(if found {
        std::io::Error::from(std::io::ErrorKind::PermissionDenied)
    } else {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    })
}

/// Sets a parent-death signal on the child (Linux): SIGTERM for a guard,
/// which then kills what it leads; SIGKILL for a bare command. The child
/// also stops at once if MAIA died before the signal was set.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut tokio::process::Command) {
    let signal = if guarded() {
        Signal::SIGTERM
    } else {
        Signal::SIGKILL
    };
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the child between fork and exec; it only
    // calls prctl(2), getppid(2) and _exit(2), which are async-signal-safe,
    // and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(signal).map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != parent {
                nix::libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Elsewhere only the process group holds the command together: a `kill -9`
/// of MAIA leaves it running (docs/architecture.md).
#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut tokio::process::Command) {}

/// Stops a child's whole process tree when dropped (also when the future
/// that owns it is dropped half-way), so no descendant outlives a call.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<Pid>,
    guarded: bool,
}

impl GroupGuard {
    /// Guards the group led by the child `pid`, started with [`command`];
    /// `None` guards nothing.
    pub fn new(pid: Option<u32>) -> Self {
        GroupGuard {
            pgid: pid.and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw),
            guarded: guarded(),
        }
    }

    /// The group's id, for logs.
    pub fn pid(&self) -> Option<i32> {
        self.pgid.map(Pid::as_raw)
    }

    /// Stops the whole tree now: asks the guard (which kills every
    /// descendant, `setsid` ones included, then exits), or sends SIGKILL to
    /// the group of a bare command.
    pub fn kill(&self) {
        let Some(pgid) = self.pgid else { return };
        let signal = if self.guarded {
            Signal::SIGTERM
        } else {
            Signal::SIGKILL
        };
        // ESRCH (group already gone) is expected and harmless.
        if let Err(err) = killpg(pgid, signal) {
            tracing::trace!(%err, "killpg");
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends SIGKILL to `pid` (ignoring a process already gone).
pub(crate) fn kill_now(pid: i32) {
    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn runnable_programs_are_found_like_exec_would() {
        assert!(ensure_runnable(OsStr::new("sh"), None).is_ok());
        assert!(ensure_runnable(OsStr::new("/bin/sh"), None).is_ok());
        let missing = ensure_runnable(OsStr::new("/nonexistent/x"), None).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        assert!(ensure_runnable(OsStr::new("no-such-program-here"), None).is_err());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plain.txt"), "x").unwrap();
        let denied = ensure_runnable(OsStr::new("./plain.txt"), Some(dir.path())).unwrap_err();
        assert_eq!(denied.kind(), std::io::ErrorKind::PermissionDenied);
    }
}
