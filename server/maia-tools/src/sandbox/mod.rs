//! The sandbox of the commands MAIA runs (Bash, `!command`, custom tools),
//! on Linux. Its layers, each with the kernel feature it needs (what holds
//! without it is in [`Sandbox::limits`] and `maia doctor`):
//!
//! - **Writes** (Landlock, ABI 1): files may be written only under the
//!   session's roots, its temp folder and the `sandbox.writable` paths (plus
//!   devices, and the command's own private `/tmp`, `/var/tmp` and
//!   `/dev/shm`); `read-only` mode leaves only the temp folder.
//! - **Network** (an unprivileged user + network namespace): unless
//!   `sandbox.network` is true the command has its own network with only a
//!   loopback, so no TCP, UDP, raw or netlink socket reaches anything
//!   outside, and abstract Unix sockets (per network namespace) neither.
//!   Without namespaces, Landlock ABI 4 still refuses TCP and ABI 6
//!   abstract Unix sockets.
//! - **Signals** (Landlock ABI 6, `LANDLOCK_SCOPE_SIGNAL`): a command can
//!   signal only processes of its own sandbox.
//! - **What is seen of the file system** (a private mount namespace): `/tmp`,
//!   `/var/tmp` and `/dev/shm` are fresh and private (the roots and temp
//!   folder under them are bound back), `/run` (and a separate
//!   `$XDG_RUNTIME_DIR`) is empty but for what programs need to run (and
//!   DNS when the network is allowed), `$SSH_AUTH_SOCK` is hidden: the Unix
//!   sockets of the user's services there cannot be connected. The
//!   [`SECRETS`] under the home folder (and `sandbox.denyRead`, less
//!   `sandbox.allowRead`) are hidden behind empty read-only folders or
//!   files. `.git`, `.git/hooks`, `.git/config` and `.maia` under the roots
//!   are mount points (they cannot be renamed or removed) and all but `.git`
//!   read-only; a missing `.git/hooks` or `.maia` is created first. Landlock
//!   forbids a command to mount or unmount anything.
//! - **Pathname Unix sockets elsewhere** (Landlock `RESOLVE_UNIX`, ABI 9):
//!   used when the kernel has it; otherwise sockets outside the hidden
//!   folders stay reachable.
//!
//! The rules are built in the parent ([`Sandbox::attach`]); the child only
//! makes system calls that are safe after `fork` (see `linux.rs`). The
//! session's temp folder is removed with the session ([`Sandbox`] owns
//! it), and left-overs of a MAIA that was killed are removed at the next
//! start ([`sweep_temp_folders`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod namespace;
#[cfg(target_os = "linux")]
pub mod proxy;
mod temp;
#[cfg(all(test, target_os = "linux"))]
mod tests;

#[cfg(target_os = "linux")]
use linux as imp;

pub use temp::sweep_temp_folders;

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
#[serde(default)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// The session's roots (its cwd first).
    pub roots: Vec<PathBuf>,
    /// The session's own temp folder (always writable; `TMPDIR`).
    pub temp_dir: Option<PathBuf>,
    /// `sandbox.writable` from the settings.
    pub writable: Vec<PathBuf>,
    /// `sandbox.network`: allow the network.
    pub network: bool,
    /// The user's home folder, where the [`SECRETS`] are.
    pub home: Option<PathBuf>,
    /// `sandbox.denyRead`: more paths hidden from commands.
    pub deny_read: Vec<PathBuf>,
    /// `sandbox.allowRead`: paths of [`SECRETS`] (or beneath them) that
    /// stay readable.
    pub allow_read: Vec<PathBuf>,
    /// `sandbox.allowedDomains`: with the network refused, these domains
    /// (`*.` for subdomains) are reached through MAIA's proxy.
    pub allowed_domains: Vec<String>,
    /// Names the proxy resolves to these addresses (tests; never read from
    /// the settings).
    #[serde(skip)]
    pub proxy_hosts: Vec<(String, std::net::SocketAddr)>,
}

impl SandboxPolicy {
    /// The paths hidden from commands: the [`SECRETS`] under the home
    /// folder and `deny_read`, less what `allow_read` re-allows.
    pub fn hidden_paths(&self) -> Vec<PathBuf> {
        let defaults = self
            .home
            .iter()
            .flat_map(|home| SECRETS.iter().map(move |s| home.join(s)));
        let mut out: Vec<PathBuf> = Vec::new();
        for path in defaults.chain(self.deny_read.iter().cloned()) {
            let allowed = self.allow_read.iter().any(|a| path.starts_with(a));
            if !allowed && !out.contains(&path) {
                out.push(path);
            }
        }
        out
    }
}

/// Why the sandbox cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the kernel does not support Landlock (or it is disabled)")]
    Unsupported,
    /// Not Linux: the sandbox is built on Landlock and Linux namespaces.
    #[error("the command sandbox works on Linux only (it is built on Landlock and namespaces)")]
    NotLinux,
    #[error("cannot set up the sandbox: {0}")]
    Setup(String),
}

/// Paths under a root that stay read-only even when the root is writable.
pub const READ_ONLY_IN_ROOTS: &[&str] = &[".git/hooks", ".git/config", ".maia"];

/// Secrets under the home folder that commands cannot read.
pub const SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".password-store",
    ".local/share/keyrings",
    ".pgpass",
    ".pypirc",
    ".vault-token",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    ".var/app/org.mozilla.firefox",
    ".var/app/com.google.Chrome",
    ".var/app/org.chromium.Chromium",
    "snap/firefox",
    "snap/chromium",
    ".maia",
];

/// Environment variables a command never gets (MAIA's own secrets).
pub const SECRET_ENV: &[&str] = &["LITELLM_API_KEY", "LiteLLM_API_Key"];

/// What this machine offers the sandbox (for the notices and `maia doctor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI of the kernel (`None`: no Landlock).
    pub landlock_abi: Option<i32>,
    /// Unprivileged user + mount namespaces.
    pub mount_namespace: bool,
    /// Unprivileged user + network namespaces.
    pub network_namespace: bool,
}

/// Probes the kernel once (the namespaces in a short-lived child).
pub fn support() -> Support {
    imp::support()
}

impl Support {
    /// What this kernel cannot enforce of `policy`, one sentence each.
    pub fn limits(&self, policy: &SandboxPolicy) -> Vec<String> {
        let mut out = Vec::new();
        if policy.mode == SandboxMode::Off {
            return out;
        }
        let abi = self.landlock_abi.unwrap_or(0);
        if !policy.network && !self.network_namespace && !policy.allowed_domains.is_empty() {
            out.push(
                "sandbox.allowedDomains is not served (no unprivileged network namespaces)"
                    .to_owned(),
            );
        }
        if !policy.network && !self.network_namespace {
            out.push(if abi >= 4 {
                "UDP, raw and other non-TCP sockets are not restricted (no unprivileged network namespaces; only TCP is refused)".to_owned()
            } else {
                "network connections are not restricted (no unprivileged network namespaces, and Landlock ABI 4 is needed for TCP)".to_owned()
            });
            if abi < 6 {
                out.push("abstract Unix sockets outside the sandbox can be connected (Landlock ABI 6 is needed)".to_owned());
            }
        }
        if abi < 6 {
            out.push(
                "commands can send signals to any of your processes (Landlock ABI 6 is needed)"
                    .to_owned(),
            );
        }
        if !self.mount_namespace {
            if policy.mode == SandboxMode::WorkspaceWrite {
                out.push(
                    ".git, .git/hooks, .git/config and .maia stay writable (no unprivileged user namespaces)"
                        .to_owned(),
                );
            }
            out.push(
                "secrets such as ~/.ssh and ~/.maia stay readable, and the Unix sockets in /tmp, /run and your runtime folder can be connected (no unprivileged user namespaces)"
                    .to_owned(),
            );
        }
        out
    }

    /// The layers that hold for `policy`, for `maia doctor`.
    pub fn enforced(&self, policy: &SandboxPolicy) -> Vec<&'static str> {
        let mut out = Vec::new();
        if policy.mode == SandboxMode::Off || self.landlock_abi.is_none() {
            return out;
        }
        out.push("writes only in the project, its temp folder and sandbox.writable");
        let abi = self.landlock_abi.unwrap_or(0);
        if policy.network {
            out.push("network allowed (sandbox.network)");
        } else if self.network_namespace && !policy.allowed_domains.is_empty() {
            out.push("no network but sandbox.allowedDomains through MAIA's proxy (a private network namespace)");
        } else if self.network_namespace {
            out.push("no network (a private network namespace)");
        } else if abi >= 4 {
            out.push("no TCP (Landlock)");
        }
        if abi >= 6 {
            out.push("no signals to processes outside the sandbox (Landlock scope)");
        }
        if self.mount_namespace {
            out.push("private /tmp, /var/tmp, /dev/shm; /run and the runtime folder hidden");
            out.push("secrets hidden (~/.ssh, ~/.aws, ~/.maia, …)");
            if policy.mode == SandboxMode::WorkspaceWrite {
                out.push(".git and .maia protected as wholes");
            }
        }
        if abi >= 9 {
            out.push("no Unix socket connections outside the writable folders (Landlock)");
        }
        out
    }
}

/// The namespaces a session's commands join (made once, kept open).
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) user: std::os::fd::OwnedFd,
    /// `None`: the network is allowed.
    pub(crate) net: Option<std::os::fd::OwnedFd>,
    /// The port of the proxy inside the network namespace, once served.
    pub(crate) proxy_port: std::sync::OnceLock<u16>,
}

/// A sandbox ready to be applied to child processes of one session. It
/// owns the session's temp folder: dropping the last clone removes it.
#[derive(Debug, Clone)]
pub struct Sandbox {
    policy: SandboxPolicy,
    support: Support,
    limits: Vec<String>,
    temp: Option<Arc<temp::TempFolder>>,
    /// The shared namespaces, with the network refused and allowed.
    shared: Arc<[std::sync::OnceLock<Option<Arc<Shared>>>; 2]>,
}

impl Sandbox {
    /// Checks what the kernel supports for `policy`: `Ok` with the limits
    /// that apply (to report once), or an error when Landlock is missing.
    /// Creates the session's temp folder.
    pub fn new(policy: SandboxPolicy) -> Result<Self, SandboxError> {
        if policy.mode != SandboxMode::Off && cfg!(not(target_os = "linux")) {
            return Err(SandboxError::NotLinux);
        }
        let support = support();
        if policy.mode != SandboxMode::Off && support.landlock_abi.is_none() {
            return Err(SandboxError::Unsupported);
        }
        let limits = support.limits(&policy);
        // Once per process, aside: the folders of a MAIA that was killed.
        // (Not in `support`: `maia __terminal` must stay single-threaded.)
        static SWEEP: std::sync::Once = std::sync::Once::new();
        SWEEP.call_once(|| {
            std::thread::spawn(|| {
                let removed = sweep_temp_folders(None);
                if removed > 0 {
                    tracing::info!(removed, "removed left-over session temp folders");
                }
            });
        });
        let temp = match &policy.temp_dir {
            Some(dir) => Some(Arc::new(temp::TempFolder::create(dir)?)),
            None => None,
        };
        Ok(Sandbox {
            policy,
            support,
            limits,
            temp,
            shared: Arc::default(),
        })
    }

    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// What this kernel cannot enforce of the policy.
    pub fn limits(&self) -> &[String] {
        &self.limits
    }

    /// Makes sure the session's temp folder exists (a command may have
    /// removed it); returns it.
    pub fn temp_dir(&self) -> Result<Option<&Path>, SandboxError> {
        match &self.temp {
            Some(temp) => temp.ensure().map(Some),
            None => Ok(None),
        }
    }

    /// Prepares the rules and installs them in `command`'s child before
    /// it runs its program; sets `TMPDIR` to the session's temp folder.
    pub fn attach(&self, command: &mut tokio::process::Command) -> Result<(), SandboxError> {
        self.attach_with(command, &self.policy)
    }

    /// [`Sandbox::attach`] for a long-lived server (an MCP server): the
    /// same file-system sandbox, the network as `network` says, and
    /// `writable` (existing folders) writable too.
    pub fn attach_server(
        &self,
        command: &mut tokio::process::Command,
        network: bool,
        writable: &[PathBuf],
    ) -> Result<(), SandboxError> {
        let mut policy = SandboxPolicy {
            network,
            ..self.policy.clone()
        };
        policy.writable.extend(writable.iter().cloned());
        self.attach_with(command, &policy)
    }

    fn attach_with(
        &self,
        command: &mut tokio::process::Command,
        policy: &SandboxPolicy,
    ) -> Result<(), SandboxError> {
        if let Some(tmp) = self.temp_dir()? {
            command.env("TMPDIR", tmp);
        }
        if policy.mode == SandboxMode::Off {
            return Ok(());
        }
        let proxy = !policy.allowed_domains.is_empty();
        let join = self.support.mount_namespace.then(|| {
            let network = policy.network || !self.support.network_namespace;
            self.shared[usize::from(network)]
                .get_or_init(|| match imp::shared(network, proxy) {
                    Ok((shared, listener)) => {
                        if let Some(listener) = listener {
                            self.serve_proxy(&shared, listener, policy);
                        }
                        Some(Arc::new(shared))
                    }
                    Err(e) => {
                        tracing::debug!(%e, "no shared namespaces: each command makes its own");
                        None
                    }
                })
                .clone()
        });
        let join = join.flatten();
        if let Some(port) = join.as_ref().and_then(|j| j.proxy_port.get()) {
            let url = format!("http://127.0.0.1:{port}");
            for name in PROXY_ENV {
                command.env(name, &url);
            }
            command.env_remove("NO_PROXY").env_remove("no_proxy");
        }
        let prepared = imp::prepare(policy, &self.support, join)?;
        imp::install(command, prepared);
        Ok(())
    }
}

/// The variables that point a command at the proxy.
const PROXY_ENV: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

impl Sandbox {
    /// Serves `sandbox.allowedDomains` on `listener` (in the session's
    /// network namespace) and records its port.
    #[cfg(target_os = "linux")]
    fn serve_proxy(
        &self,
        shared: &Shared,
        listener: std::net::TcpListener,
        policy: &SandboxPolicy,
    ) {
        let port = listener.local_addr().map(|a| a.port());
        let allowed = proxy::Allowed {
            domains: policy.allowed_domains.clone(),
            hosts: policy.proxy_hosts.clone(),
        };
        match (port, proxy::serve(listener, allowed)) {
            (Ok(port), Ok(())) => {
                let _ = shared.proxy_port.set(port);
            }
            (Err(e), _) | (_, Err(e)) => tracing::warn!(%e, "the sandbox proxy cannot start"),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn serve_proxy(&self, _: &Shared, _: std::net::TcpListener, _: &SandboxPolicy) {}
}

/// Applies `policy` to the calling process, which must be single-threaded
/// and about to exec its command (`maia __terminal`, for a command another
/// process starts and MAIA cannot hook into).
pub fn restrict_current_process(policy: &SandboxPolicy) -> Result<(), SandboxError> {
    if policy.mode == SandboxMode::Off {
        return Ok(());
    }
    let support = support();
    if support.landlock_abi.is_none() {
        return Err(SandboxError::Unsupported);
    }
    imp::prepare(policy, &support, None).and_then(imp::restrict_self)
}

/// Whether a command that failed in the sandbox failed because of it, as
/// far as MAIA can tell. The sandbox (Landlock, seccomp, Seatbelt, the
/// network proxy) refuses a call inside the child with an errno, not with
/// a signal or an exit status MAIA could read: the one signal is the
/// child's own error words. This is the one place they are read; the
/// caller keeps the answer as [`crate::ToolOutput::sandbox_denied`].
pub fn denial(output: &str) -> bool {
    output.contains("Permission denied")
        || output.contains("Read-only file system")
        || output.contains("Operation not permitted")
        || output.contains("Network is unreachable")
        || output.contains("Device or resource busy")
        || output.contains("not in sandbox.allowedDomains")
        || output.contains("CONNECT tunnel failed")
}

/// The note added to a failed command's result when the sandbox may be
/// the cause.
pub fn denial_note(policy: &SandboxPolicy) -> String {
    format!(
        "[MAIA sandbox ({}): writes are allowed only in the project, its temp folder ({}) and sandbox.writable; .git, .git/hooks, .git/config and .maia are protected; secrets such as ~/.ssh are hidden; network {}. The failure above may come from the sandbox: do not try to get around it. If the command needs it, run the same command again: the user will be asked and can allow one run without the sandbox.]",
        policy.mode.id(),
        policy
            .temp_dir
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "none".to_owned()),
        if policy.network {
            "allowed"
        } else if policy.allowed_domains.is_empty() {
            "refused"
        } else {
            "refused but for sandbox.allowedDomains, through the proxy in HTTP_PROXY/HTTPS_PROXY"
        },
    )
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::sync::Arc;

    use super::{SandboxError, SandboxPolicy, Shared, Support};

    pub(super) struct Prepared;

    pub(super) fn shared(
        _: bool,
        _: bool,
    ) -> std::io::Result<(Shared, Option<std::net::TcpListener>)> {
        Err(std::io::ErrorKind::Unsupported.into())
    }

    pub(super) fn support() -> Support {
        Support {
            landlock_abi: None,
            mount_namespace: false,
            network_namespace: false,
        }
    }
    pub(super) fn prepare(
        _: &SandboxPolicy,
        _: &Support,
        _: Option<Arc<Shared>>,
    ) -> Result<Prepared, SandboxError> {
        Err(SandboxError::Unsupported)
    }
    pub(super) fn install(_: &mut tokio::process::Command, _: Prepared) {}
    pub(super) fn restrict_self(_: Prepared) -> Result<(), SandboxError> {
        Err(SandboxError::Unsupported)
    }
}

#[cfg(test)]
mod policy_tests {
    use super::*;

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

    #[test]
    fn hidden_paths_add_deny_read_and_drop_allow_read() {
        let policy = SandboxPolicy {
            home: Some("/h".into()),
            deny_read: vec!["/srv/secret".into()],
            allow_read: vec!["/h/.config/gh".into()],
            ..Default::default()
        };
        let hidden = policy.hidden_paths();
        assert!(hidden.contains(&PathBuf::from("/h/.ssh")));
        assert!(hidden.contains(&PathBuf::from("/h/.maia")));
        assert!(hidden.contains(&PathBuf::from("/srv/secret")));
        assert!(!hidden.contains(&PathBuf::from("/h/.config/gh")));
    }

    #[test]
    fn an_old_policy_without_the_new_fields_still_parses() {
        let policy: SandboxPolicy =
            serde_json::from_str(r#"{"mode":"workspace-write","roots":["/p"],"temp_dir":null,"writable":[],"network":false}"#)
                .unwrap_or_default();
        assert_eq!(policy.roots, vec![PathBuf::from("/p")]);
    }

    #[test]
    fn limits_name_each_missing_layer() {
        let policy = SandboxPolicy::default();
        let none = Support {
            landlock_abi: Some(3),
            mount_namespace: false,
            network_namespace: false,
        };
        let limits = none.limits(&policy).join("\n");
        for word in ["network", "abstract", "signals", ".git", "secrets"] {
            assert!(limits.contains(word), "{word}: {limits}");
        }
        let all = Support {
            landlock_abi: Some(7),
            mount_namespace: true,
            network_namespace: true,
        };
        assert!(all.limits(&policy).is_empty());
    }
}
