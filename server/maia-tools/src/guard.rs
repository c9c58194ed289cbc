//! The guard: a small supervisor that runs one command and makes sure none
//! of its descendants outlives it (see [`crate::process`]).
//!
//! `maia __guard -- PROGRAM ARGS…` becomes a child subreaper, blocks
//! SIGCHLD/SIGTERM/SIGINT/SIGHUP, starts PROGRAM in its own process group
//! (stdio inherited) and waits. When PROGRAM exits it kills every remaining
//! descendant (background jobs, `setsid` escapees, double forks: as a
//! subreaper it is the ancestor of all of them), reaps them and exits with
//! PROGRAM's status. On SIGTERM (MAIA stopping the call, or MAIA's death
//! through the parent-death signal), SIGINT or SIGHUP it does the same and
//! exits with 128 + the signal. Linux only; elsewhere it just runs PROGRAM.

use std::collections::HashMap;
use std::ffi::OsString;
use std::time::Duration;

/// Runs the guard with `args` (what followed `__guard`, starting with
/// `--`); returns the exit code.
pub fn run(args: &[OsString]) -> i32 {
    let args = match args.first().and_then(|a| a.to_str()) {
        Some("--") => &args[1..],
        _ => args,
    };
    let Some((program, rest)) = args.split_first() else {
        eprintln!("maia __guard: no command given");
        return 2;
    };
    imp::run(program, rest)
}

#[cfg(target_os = "linux")]
mod imp {
    use super::*;
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    use nix::unistd::Pid;

    pub(super) fn run(program: &OsString, args: &[OsString]) -> i32 {
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            eprintln!("maia __guard: cannot become a subreaper: {e}");
        }
        let mut signals = SigSet::empty();
        for s in [
            Signal::SIGCHLD,
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
        ] {
            signals.add(s);
        }
        // Blocked before the child starts, so no signal is missed; the
        // child starts with an empty mask (std resets it).
        if let Err(e) = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&signals), None) {
            eprintln!("maia __guard: cannot block signals: {e}");
            return 126;
        }
        let child = match spawn(program, args) {
            Ok(child) => child,
            Err(e) => {
                eprintln!("maia: cannot start `{}`: {e}", program.to_string_lossy());
                return if e.kind() == std::io::ErrorKind::NotFound {
                    127
                } else {
                    126
                };
            }
        };
        let child = Pid::from_raw(child.id() as i32);
        loop {
            let signal = match signals.wait() {
                Ok(signal) => signal,
                Err(_) => continue,
            };
            if signal != Signal::SIGCHLD {
                kill_descendants();
                return 128 + signal as i32;
            }
            if let Some(code) = reap(child) {
                kill_descendants();
                return code;
            }
        }
    }

    /// Starts the command (in the guard's process group), retrying briefly
    /// while the file is being written (`ETXTBSY`).
    fn spawn(program: &OsString, args: &[OsString]) -> std::io::Result<std::process::Child> {
        let mut attempts = 0;
        loop {
            match std::process::Command::new(program).args(args).spawn() {
                Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) && attempts < 10 => {
                    attempts += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    /// Reaps every child that has ended; returns the command's exit code
    /// once it has.
    fn reap(child: Pid) -> Option<i32> {
        let mut code = None;
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, status)) if pid == child => code = Some(status),
                Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => {
                    code = Some(128 + signal as i32)
                }
                Ok(WaitStatus::StillAlive) | Err(_) => return code,
                Ok(_) => {}
            }
        }
    }

    /// Kills every descendant of this process and reaps them; a few rounds,
    /// as a dying process's children come back to the subreaper.
    fn kill_descendants() {
        let me = std::process::id() as i32;
        for _ in 0..200 {
            let alive = descendants(me);
            if alive.is_empty() {
                break;
            }
            for pid in alive {
                crate::process::kill_now(pid);
            }
            let _ = reap(Pid::from_raw(-1));
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = reap(Pid::from_raw(-1));
    }

    /// The live (not zombie) descendants of `root`, from `/proc`.
    pub(super) fn descendants(root: i32) -> Vec<i32> {
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut zombies = Vec::new();
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`; comm may hold spaces and parens.
            let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
                continue;
            };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            let Some(ppid) = fields.next().and_then(|p| p.parse::<i32>().ok()) else {
                continue;
            };
            if state == Some("Z") {
                zombies.push(pid);
            }
            children.entry(ppid).or_default().push(pid);
        }
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(pid) = stack.pop() {
            for &child in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
                stack.push(child);
                if !zombies.contains(&child) {
                    out.push(child);
                }
            }
        }
        out
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::*;

    pub(super) fn run(program: &OsString, args: &[OsString]) -> i32 {
        let _ = (Duration::ZERO, HashMap::<(), ()>::new());
        match std::process::Command::new(program).args(args).status() {
            Ok(status) => status.code().unwrap_or(1),
            Err(e) => {
                eprintln!("maia: cannot start `{}`: {e}", program.to_string_lossy());
                127
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::imp;

    #[test]
    fn finds_its_own_descendants() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let found = imp::descendants(std::process::id() as i32);
        assert!(found.contains(&(child.id() as i32)), "{found:?}");
        child.kill().unwrap();
        child.wait().unwrap();
        let found = imp::descendants(std::process::id() as i32);
        assert!(!found.contains(&(child.id() as i32)), "{found:?}");
    }
}
