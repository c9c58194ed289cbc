//! The Linux sandbox: the Landlock ruleset (the `landlock` crate) and the
//! namespaces ([`super::namespace`]), built in the parent and applied in
//! the child between `fork` and `exec`.

use std::os::fd::OwnedFd;
use std::sync::{Arc, LazyLock};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope,
};

pub(super) use super::namespace::shared;
use super::namespace::{Plan, probe};
use super::{SandboxError, SandboxMode, SandboxPolicy, Shared, Support};

/// The newest ABI whose write rights are handled.
const ABI_USED: ABI = ABI::V6;

/// Devices commands may always write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// The kernel's Landlock ABI (`landlock_create_ruleset(NULL, 0,
/// LANDLOCK_CREATE_RULESET_VERSION)`), `None` when Landlock is missing or
/// disabled.
#[allow(unsafe_code)]
fn landlock_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: nix::libc::c_uint = 1;
    // SAFETY: a query with a null attribute pointer and size 0, as the
    // kernel documents for the version flag; no memory is passed.
    let v = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (v > 0).then(|| i32::try_from(v).unwrap_or(i32::MAX))
}

pub(super) fn support() -> Support {
    static SUPPORT: LazyLock<Support> = LazyLock::new(|| {
        let landlock_abi = landlock_abi();
        let mount_namespace = probe(false);
        let network_namespace = mount_namespace && probe(true);
        Support {
            landlock_abi,
            mount_namespace,
            network_namespace,
        }
    });
    *SUPPORT
}

/// Everything the child needs, built before the fork.
pub(super) struct Prepared {
    ruleset: Option<RulesetCreated>,
    plan: Option<Plan>,
}

/// The write rights the kernel handles (for rules the child adds).
fn handled_write(abi: i32) -> BitFlags<AccessFs> {
    let abi = ABI::from(abi.min(ABI_USED as i32));
    AccessFs::from_write(abi)
}

pub(super) fn prepare(
    policy: &SandboxPolicy,
    support: &Support,
    join: Option<Arc<Shared>>,
) -> Result<Prepared, SandboxError> {
    let err = |e: landlock::RulesetError| SandboxError::Setup(e.to_string());
    let abi = support.landlock_abi.unwrap_or(0);
    let write = AccessFs::from_write(ABI_USED);
    // A private network namespace stands for the network rules, so that a
    // command may still use its own loopback.
    let netns = !policy.network && support.network_namespace;
    let mut ruleset = Ruleset::default()
        .handle_access(write)
        .map_err(err)?
        .handle_access(AccessFs::ResolveUnix)
        .map_err(err)?
        .scope(Scope::Signal)
        .map_err(err)?;
    if !policy.network {
        ruleset = ruleset.scope(Scope::AbstractUnixSocket).map_err(err)?;
        if !netns {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(ABI_USED))
                .map_err(err)?;
        }
    }
    let mut created = ruleset.create().map_err(err)?;
    let mut writable = Vec::new();
    if policy.mode == SandboxMode::WorkspaceWrite {
        writable.extend(policy.roots.iter().cloned());
        writable.extend(policy.writable.iter().cloned());
    }
    writable.extend(policy.temp_dir.iter().cloned());
    for path in &writable {
        // A missing path grants nothing.
        if let Ok(fd) = PathFd::new(path) {
            created = created
                .add_rule(PathBeneath::new(fd, write | AccessFs::ResolveUnix))
                .map_err(err)?;
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
    let plan = if support.mount_namespace {
        // The child grants the private /tmp it mounts through this copy.
        let fd: Option<OwnedFd> = created
            .try_clone()
            .map_err(|e| SandboxError::Setup(e.to_string()))?
            .into();
        let grant = fd.map(|fd| (fd, handled_write(abi).bits()));
        Some(Plan::new(policy, netns, grant, join)?)
    } else {
        None
    };
    Ok(Prepared {
        ruleset: Some(created),
        plan,
    })
}

#[allow(unsafe_code)]
pub(super) fn install(command: &mut tokio::process::Command, prepared: Prepared) {
    let mut prepared = prepared;
    // SAFETY: the closure runs in the child between fork and exec; it
    // only makes async-signal-safe system calls (unshare, open, write,
    // mount, ioctl, prctl, landlock_*) on data built before the fork, and
    // allocates nothing (see `Plan::enter`).
    unsafe {
        command.pre_exec(move || {
            if let Some(plan) = &mut prepared.plan {
                plan.enter()?;
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

/// Applies `prepared` to the calling process (single-threaded, about to
/// exec its command).
pub(super) fn restrict_self(mut prepared: Prepared) -> Result<(), SandboxError> {
    if let Some(plan) = &mut prepared.plan {
        plan.enter()
            .map_err(|e| SandboxError::Setup(format!("namespaces: {e}")))?;
    }
    if let Some(ruleset) = prepared.ruleset.take() {
        ruleset
            .restrict_self()
            .map_err(|e| SandboxError::Setup(e.to_string()))?;
    }
    Ok(())
}
