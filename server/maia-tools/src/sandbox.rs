//! The sandbox of the commands MAIA runs (Bash, `!command`, custom tools),
//! on Linux with Landlock (the `landlock` crate).
//!
//! - `workspace-write` (the default when the kernel supports Landlock):
//!   files may be written only under the session's roots, its temp folder
//!   and the `sandbox.writable` paths (plus `/dev/null` and terminals);
//!   `.git/hooks`, `.git/config` and `.maia` under the roots are read-only;
//! - `read-only`: nothing may be written but the temp folder and devices;
//! - `off`: no sandbox.
//!
//! TCP connections and binds are refused unless `network` is true
//! (Landlock ABI ≥ 4; with an older kernel the network stays open and
//! [`Sandbox::limits`] says so). Reading is never restricted.
//!
//! Landlock only adds permissions beneath folders, it cannot take some
//! back inside a writable root; the read-only folders inside the roots are
//! therefore bind-mounted read-only in a private mount namespace (an
//! unprivileged user namespace, when the kernel allows it; otherwise
//! [`Sandbox::limits`] says they stay writable).
//!
//! The rules are built in the parent ([`Sandbox::prepare`]); the child
//! only makes system calls that are safe after `fork` ([`apply`]), called
//! from the spawn sites through [`Sandbox::attach`].

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The `sandbox` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    #[default]
    WorkspaceWrite,
    ReadOnly,
    Off,
}

impl SandboxMode {
    /// `"workspace-write" | "read-only" | "off"`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "workspace-write" => Some(Self::WorkspaceWrite),
            "read-only" => Some(Self::ReadOnly),
            "off" => Some(Self::Off),
            _ => None,
        }
    }

    pub fn id(self) -> &'static str {
        match self {
            Self::WorkspaceWrite => "workspace-write",
            Self::ReadOnly => "read-only",
            Self::Off => "off",
        }
    }
}

/// What one session's commands may do.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// The session's roots (its cwd first).
    pub roots: Vec<PathBuf>,
    /// The session's own temp folder (always writable; `TMPDIR`).
    pub temp_dir: Option<PathBuf>,
    /// `sandbox.writable` from the settings.
    pub writable: Vec<PathBuf>,
    /// `sandbox.network`: allow TCP connections and binds.
    pub network: bool,
}

/// Why the sandbox cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the kernel does not support Landlock (or it is disabled)")]
    Unsupported,
    #[error("cannot set up the sandbox: {0}")]
    Setup(String),
}

/// Paths under a root that stay read-only even when the root is writable.
pub const READ_ONLY_IN_ROOTS: &[&str] = &[".git/hooks", ".git/config", ".maia"];

/// Devices commands may always write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// A sandbox ready to be applied to child processes of one session.
#[derive(Debug, Clone)]
pub struct Sandbox {
    policy: SandboxPolicy,
    limits: Vec<String>,
}

impl Sandbox {
    /// Checks what the kernel supports for `policy`: `Ok` with the limits
    /// that apply (to report once), or an error when Landlock is missing.
    pub fn new(policy: SandboxPolicy) -> Result<Self, SandboxError> {
        let mut limits = Vec::new();
        if policy.mode != SandboxMode::Off {
            imp::check_supported()?;
            if !policy.network && !imp::network_supported() {
                limits.push(
                    "network connections are not restricted (Landlock ABI 4 is needed)".to_owned(),
                );
            }
            if policy.mode == SandboxMode::WorkspaceWrite && !imp::mount_namespace_supported() {
                limits.push(
                    ".git/hooks, .git/config and .maia stay writable (no unprivileged user namespaces)"
                        .to_owned(),
                );
            }
        }
        Ok(Sandbox { policy, limits })
    }

    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// What this kernel cannot enforce of the policy.
    pub fn limits(&self) -> &[String] {
        &self.limits
    }

    /// Creates the session's temp folder (private to the user, so other
    /// users' commands cannot plant files); returns it.
    pub fn temp_dir(&self) -> Result<Option<&Path>, SandboxError> {
        let Some(tmp) = &self.policy.temp_dir else {
            return Ok(None);
        };
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(tmp)
            .map_err(|e| SandboxError::Setup(format!("{}: {e}", tmp.display())))?;
        Ok(Some(tmp))
    }

    /// Prepares the rules and installs them in `command`'s child before
    /// it runs its program; sets `TMPDIR` to the session's temp folder.
    pub fn attach(&self, command: &mut tokio::process::Command) -> Result<(), SandboxError> {
        if let Some(tmp) = self.temp_dir()? {
            command.env("TMPDIR", tmp);
        }
        if self.policy.mode == SandboxMode::Off {
            return Ok(());
        }
        let prepared = imp::prepare(&self.policy)?;
        imp::install(command, prepared);
        Ok(())
    }
}

/// Applies `policy` to the calling process, which must be single-threaded
/// and about to exec its command (`maia __terminal`, for a command another
/// process starts and MAIA cannot hook into).
pub fn restrict_current_process(policy: &SandboxPolicy) -> Result<(), SandboxError> {
    if policy.mode == SandboxMode::Off {
        return Ok(());
    }
    imp::prepare(policy).and_then(imp::restrict_self)
}

/// The words a sandbox denial shows in a command's output.
pub fn looks_denied(output: &str) -> bool {
    output.contains("Permission denied")
        || output.contains("Read-only file system")
        || output.contains("Operation not permitted")
}

/// How a sandbox note starts (the engine looks for it).
pub const DENIAL_MARK: &str = "[MAIA sandbox";

/// The note added to a failed command's result when the sandbox may be
/// the cause.
pub fn denial_note(policy: &SandboxPolicy) -> String {
    format!(
        "{DENIAL_MARK} ({}): writes are allowed only in the project, its temp folder ({}) and sandbox.writable; .git/hooks, .git/config and .maia are read-only; network {}. The failure above may come from the sandbox: do not try to get around it. If the command needs it, run the same command again: the user will be asked and can allow one run without the sandbox.]",
        policy.mode.id(),
        policy
            .temp_dir
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "none".to_owned()),
        if policy.network { "allowed" } else { "refused" },
    )
}

fn cstring(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_encoded_bytes()).ok()
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod imp {
    use std::ffi::CString;
    use std::os::fd::AsFd;
    use std::path::{Path, PathBuf};
    use std::sync::LazyLock;

    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
    };
    use nix::mount::MsFlags;

    use super::{DEVICES, READ_ONLY_IN_ROOTS, SandboxError, SandboxMode, SandboxPolicy, cstring};

    const ABI_USED: ABI = ABI::V6;

    pub(super) fn check_supported() -> Result<(), SandboxError> {
        static OK: LazyLock<bool> = LazyLock::new(|| {
            Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessFs::from_write(ABI::V1))
                .and_then(|r| r.create())
                .is_ok()
        });
        if *OK {
            Ok(())
        } else {
            Err(SandboxError::Unsupported)
        }
    }

    pub(super) fn network_supported() -> bool {
        static OK: LazyLock<bool> = LazyLock::new(|| {
            Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessNet::from_all(ABI::V4))
                .and_then(|r| r.create())
                .is_ok()
        });
        *OK
    }

    /// Tries once, in a child, whether an unprivileged user and mount
    /// namespace can be made.
    pub(super) fn mount_namespace_supported() -> bool {
        static OK: LazyLock<bool> = LazyLock::new(|| {
            use std::os::unix::process::CommandExt;
            let mut probe = std::process::Command::new("/bin/true");
            let ns = Namespace::new(Vec::new());
            // SAFETY: the closure only makes async-signal-safe system calls
            // on data prepared before the fork (see `Namespace::enter`).
            unsafe {
                probe.pre_exec(move || ns.enter());
            }
            probe
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        *OK
    }

    /// Everything the child needs, built before the fork.
    pub(super) struct Prepared {
        ruleset: Option<RulesetCreated>,
        namespace: Option<Namespace>,
    }

    pub(super) fn prepare(policy: &SandboxPolicy) -> Result<Prepared, SandboxError> {
        let err = |e: landlock::RulesetError| SandboxError::Setup(e.to_string());
        let write = AccessFs::from_write(ABI_USED);
        let mut ruleset = Ruleset::default().handle_access(write).map_err(err)?;
        if !policy.network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(ABI_USED))
                .map_err(err)?
                .scope(Scope::AbstractUnixSocket)
                .map_err(err)?;
        }
        let mut created = ruleset.create().map_err(err)?;
        let mut writable: Vec<PathBuf> = Vec::new();
        if policy.mode == SandboxMode::WorkspaceWrite {
            writable.extend(policy.roots.iter().cloned());
            writable.extend(policy.writable.iter().cloned());
        }
        writable.extend(policy.temp_dir.iter().cloned());
        for path in writable {
            // A missing path grants nothing.
            if let Ok(fd) = PathFd::new(&path) {
                created = created.add_rule(PathBeneath::new(fd, write)).map_err(err)?;
            }
        }
        for dev in DEVICES {
            if let Ok(fd) = PathFd::new(dev) {
                let access = AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
                created = created
                    .add_rule(PathBeneath::new(fd, access))
                    .map_err(err)?;
            }
        }
        let read_only: Vec<PathBuf> = if policy.mode == SandboxMode::WorkspaceWrite {
            policy
                .roots
                .iter()
                .chain(&policy.writable)
                .flat_map(|root| READ_ONLY_IN_ROOTS.iter().map(move |p| root.join(p)))
                .filter(|p| p.exists())
                .collect()
        } else {
            Vec::new()
        };
        let namespace = (!read_only.is_empty() && mount_namespace_supported())
            .then(|| Namespace::new(read_only));
        Ok(Prepared {
            ruleset: Some(created),
            namespace,
        })
    }

    pub(super) fn install(command: &mut tokio::process::Command, prepared: Prepared) {
        let mut prepared = prepared;
        // SAFETY: the closure runs in the child between fork and exec; it
        // only makes async-signal-safe system calls (unshare, open, write,
        // mount, prctl, landlock_restrict_self) on data built before the
        // fork, and allocates nothing on the success path.
        unsafe {
            command.pre_exec(move || {
                if let Some(ns) = &prepared.namespace {
                    ns.enter()?;
                }
                if let Some(ruleset) = prepared.ruleset.take() {
                    ruleset
                        .restrict_self()
                        .map_err(|_| std::io::Error::from_raw_os_error(nix::libc::EPERM))?;
                }
                Ok(())
            });
        }
    }

    /// Applies `prepared` to the calling process (single-threaded, about
    /// to exec its command).
    pub(super) fn restrict_self(mut prepared: Prepared) -> Result<(), SandboxError> {
        if let Some(ns) = &prepared.namespace {
            ns.enter()
                .map_err(|e| SandboxError::Setup(format!("mount namespace: {e}")))?;
        }
        if let Some(ruleset) = prepared.ruleset.take() {
            ruleset
                .restrict_self()
                .map_err(|e| SandboxError::Setup(e.to_string()))?;
        }
        Ok(())
    }

    /// A private user + mount namespace where some folders are read-only.
    pub(super) struct Namespace {
        uid_map: Vec<u8>,
        gid_map: Vec<u8>,
        /// (path, flags of its mount that must be kept on remount).
        read_only: Vec<(CString, MsFlags)>,
    }

    impl Namespace {
        fn new(paths: Vec<PathBuf>) -> Self {
            let uid = nix::unistd::getuid();
            let gid = nix::unistd::getgid();
            Namespace {
                uid_map: format!("{uid} {uid} 1\n").into_bytes(),
                gid_map: format!("{gid} {gid} 1\n").into_bytes(),
                read_only: paths
                    .iter()
                    .filter_map(|p| Some((cstring(p)?, locked_flags(p))))
                    .collect(),
            }
        }

        /// In the child: enters the namespaces and remounts the folders.
        fn enter(&self) -> std::io::Result<()> {
            use nix::sched::{CloneFlags, unshare};
            unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)?;
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", &self.uid_map)?;
            write_file(c"/proc/self/gid_map", &self.gid_map)?;
            nix::mount::mount(
                None::<&std::ffi::CStr>,
                c"/",
                None::<&std::ffi::CStr>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&std::ffi::CStr>,
            )?;
            for (path, locked) in &self.read_only {
                let path = path.as_c_str();
                nix::mount::mount(
                    Some(path),
                    path,
                    None::<&std::ffi::CStr>,
                    MsFlags::MS_BIND | MsFlags::MS_REC,
                    None::<&std::ffi::CStr>,
                )?;
                nix::mount::mount(
                    None::<&std::ffi::CStr>,
                    path,
                    None::<&std::ffi::CStr>,
                    MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | *locked,
                    None::<&std::ffi::CStr>,
                )?;
            }
            Ok(())
        }
    }

    fn write_file(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
        use nix::fcntl::{OFlag, open};
        use nix::sys::stat::Mode;
        let fd = open(path, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty())?;
        nix::unistd::write(fd.as_fd(), data)?;
        Ok(())
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
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::{SandboxError, SandboxPolicy};

    pub(super) struct Prepared;

    pub(super) fn check_supported() -> Result<(), SandboxError> {
        Err(SandboxError::Unsupported)
    }
    pub(super) fn network_supported() -> bool {
        false
    }
    pub(super) fn mount_namespace_supported() -> bool {
        false
    }
    pub(super) fn prepare(_: &SandboxPolicy) -> Result<Prepared, SandboxError> {
        Err(SandboxError::Unsupported)
    }
    pub(super) fn install(_: &mut tokio::process::Command, _: Prepared) {}
    pub(super) fn restrict_self(_: Prepared) -> Result<(), SandboxError> {
        Err(SandboxError::Unsupported)
    }
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::tools::test_util::{ctx, run};

    /// A project `<tmp>/p` with `.git/hooks` and `.maia`, its session temp
    /// folder `<tmp>/session-tmp`, and a sandboxed context.
    fn setup(mode: SandboxMode, network: bool) -> Option<(tempfile::TempDir, crate::ToolContext)> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p");
        std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(p.join(".maia")).unwrap();
        std::fs::write(p.join(".git/config"), "[core]\n").unwrap();
        let policy = SandboxPolicy {
            mode,
            roots: vec![p.clone()],
            temp_dir: Some(dir.path().join("session-tmp")),
            writable: Vec::new(),
            network,
        };
        let sandbox = match Sandbox::new(policy) {
            Ok(s) => s,
            Err(SandboxError::Unsupported) => {
                eprintln!("Landlock unsupported here: sandbox test skipped");
                return None;
            }
            Err(e) => panic!("{e}"),
        };
        let mut ctx = ctx(&p);
        ctx.sandbox = Some(Arc::new(sandbox));
        Some((dir, ctx))
    }

    async fn sh(ctx: &crate::ToolContext, command: &str) -> crate::ToolOutput {
        run(ctx, "Bash", json!({ "command": command })).await
    }

    #[tokio::test]
    async fn workspace_write_allows_the_project_and_temp_only() {
        let Some((dir, ctx)) = setup(SandboxMode::WorkspaceWrite, false) else {
            return;
        };
        let out = sh(&ctx, "echo a > inside && mkdir -p sub/x && echo b > sub/x/f && echo t > \"$TMPDIR/t\" && cat inside").await;
        assert!(!out.is_error, "{}", out.content);
        assert!(dir.path().join("session-tmp/t").exists());
        // The parent of the project.
        let out = sh(&ctx, "echo x > ../outside").await;
        assert!(out.is_error, "{}", out.content);
        assert!(!dir.path().join("outside").exists());
        assert!(out.content.contains("MAIA sandbox"), "{}", out.content);
        // The home folder.
        let probe = format!("maia-sandbox-probe-{}", std::process::id());
        let out = sh(&ctx, &format!("touch \"$HOME/{probe}\"")).await;
        let home = std::env::var_os("HOME")
            .map(std::path::PathBuf::from)
            .unwrap();
        let leaked = home.join(&probe).exists();
        let _ = std::fs::remove_file(home.join(&probe));
        assert!(out.is_error && !leaked, "{}", out.content);
        // Read-only folders inside the project.
        eprintln!(
            "mount namespace supported: {}",
            imp::mount_namespace_supported()
        );
        if imp::mount_namespace_supported() {
            for cmd in [
                "echo x > .git/hooks/pre-commit",
                "echo x >> .git/config",
                "mkdir -p .maia/tools && echo x > .maia/settings.json",
            ] {
                let out = sh(&ctx, cmd).await;
                assert!(out.is_error, "{cmd}: {}", out.content);
            }
            assert!(!dir.path().join("p/.git/hooks/pre-commit").exists());
            assert!(!dir.path().join("p/.maia/settings.json").exists());
            assert_eq!(
                std::fs::read_to_string(dir.path().join("p/.git/config")).unwrap(),
                "[core]\n"
            );
            // Reading them still works.
            let out = sh(&ctx, "cat .git/config").await;
            assert!(!out.is_error, "{}", out.content);
        }
    }

    #[tokio::test]
    async fn network_is_refused_unless_allowed() {
        if !imp::network_supported() {
            return;
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
        let Some((_dir, ctx)) = setup(SandboxMode::WorkspaceWrite, false) else {
            return;
        };
        let out = sh(&ctx, &connect).await;
        assert!(
            out.is_error && !out.content.contains("connected"),
            "{}",
            out.content
        );
        let Some((_dir, ctx)) = setup(SandboxMode::WorkspaceWrite, true) else {
            return;
        };
        let out = sh(&ctx, &connect).await;
        assert!(
            !out.is_error && out.content.contains("connected"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn read_only_refuses_the_project_and_off_restores() {
        let Some((dir, ctx)) = setup(SandboxMode::ReadOnly, false) else {
            return;
        };
        let out = sh(&ctx, "echo a > inside").await;
        assert!(out.is_error, "{}", out.content);
        let out = sh(&ctx, "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"").await;
        assert!(!out.is_error, "{}", out.content);
        let Some((dir2, ctx)) = setup(SandboxMode::Off, false) else {
            return;
        };
        let out = sh(
            &ctx,
            "echo a > inside && echo x > ../outside && echo y > .git/hooks/h",
        )
        .await;
        assert!(!out.is_error, "{}", out.content);
        assert!(dir2.path().join("outside").exists());
        drop(dir);
    }

    #[test]
    fn modes_parse() {
        for m in [
            SandboxMode::WorkspaceWrite,
            SandboxMode::ReadOnly,
            SandboxMode::Off,
        ] {
            assert_eq!(SandboxMode::parse(m.id()), Some(m));
        }
        assert_eq!(SandboxMode::parse("none"), None);
    }
}
