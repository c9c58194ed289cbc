//! `maia doctor`'s checks of what the machine offers a session in the
//! folder: the language servers that serve it (started, then stopped) and
//! the command sandbox (what the kernel offers, what holds).

use std::path::Path;

use super::Check;

/// The language servers a session here would use: each found or set, the
/// root it would serve, and whether it starts (never blocking).
pub(super) async fn language_server_checks(home: Option<&Path>, cwd: &Path) -> Vec<Check> {
    let (settings, warnings) =
        maia_core::language_servers(&maia_core::settings::SettingsFiles::read(home, cwd));
    let mut checks: Vec<Check> = warnings
        .into_iter()
        .map(|w| Check::failed("lsp", w, "correct `lsp` in the settings"))
        .collect();
    if settings.servers.is_empty() {
        checks.push(Check::absent(
            "lsp",
            "no language servers (none on PATH, none in `lsp`): edits are not checked",
        ));
        return checks;
    }
    let manager = maia_lsp_client::LspManager::new(
        settings,
        cwd.to_path_buf(),
        None,
        std::sync::Arc::new(|_| {}),
        maia_lsp_client::LspPool::new(),
    );
    for server in manager.check(true).await {
        checks.push(match (&server.root, server.started) {
            (_, Some(Ok(info))) => Check::ok(
                "lsp",
                format!(
                    "language server {} (`{}`) starts for {}: {info}",
                    server.name,
                    server.command,
                    server.root.as_deref().unwrap_or(cwd).display()
                ),
            ),
            (_, Some(Err(e))) => Check::failed(
                "lsp",
                format!("language server {} (`{}`): {e}", server.name, server.command),
                "check its command in `lsp`, or turn it off with `\"lsp\": {\"NAME\": {\"disabled\": true}}`",
            ),
            (_, None) => Check::absent(
                "lsp",
                format!(
                    "language server {} (`{}`): not used here (no root marker in this folder)",
                    server.name, server.command
                ),
            ),
        });
    }
    checks
}

/// The command sandbox: what the kernel offers and what holds with the
/// settings (never blocking: prompts can be answered without it).
pub(super) fn sandbox_checks(home: Option<&Path>, cwd: &Path) -> Vec<Check> {
    use maia_tools::sandbox::SandboxMode;
    let (policy, _) = maia_core::settings::sandbox_policy(
        &maia_core::settings::SettingsFiles::read(home, cwd),
        cwd,
        "doctor",
    );
    let support = maia_tools::sandbox::support();
    let yes = |b: bool| if b { "yes" } else { "no" };
    let mut checks = vec![match support.landlock_abi {
        Some(abi) => Check::ok("sandbox", format!("sandbox: Landlock ABI {abi}")),
        None if cfg!(not(target_os = "linux")) => Check::failed(
            "sandbox",
            "sandbox: Linux only: commands run without a sandbox on this system",
            "run MAIA on Linux (or WSL 2) for the sandbox, or set \"sandbox\": \"off\" to acknowledge it",
        ),
        None => Check::failed(
            "sandbox",
            "sandbox: no Landlock in this kernel: commands run without a sandbox",
            "use a Linux kernel of 5.13 or later with Landlock enabled (the `lsm=` boot parameter)",
        ),
    }];
    let namespaces = format!(
        "sandbox: unprivileged user and mount namespaces: {}; network namespaces: {}; PID namespaces: not used (Landlock's signal scope stands for them); seccomp: not used (the network namespace covers every socket family)",
        yes(support.mount_namespace),
        yes(support.network_namespace)
    );
    checks.push(if support.mount_namespace && support.network_namespace {
        Check::ok("sandbox", namespaces)
    } else {
        Check::failed(
            "sandbox",
            namespaces,
            "allow unprivileged user namespaces (e.g. Ubuntu: the AppArmor sysctl kernel.apparmor_restrict_unprivileged_userns=0, or a profile for maia)",
        )
    });
    if policy.mode == SandboxMode::Off {
        checks.push(Check::absent(
            "sandbox",
            "sandbox: off (the `sandbox` setting)",
        ));
        return checks;
    }
    let enforced = support.enforced(&policy);
    if !enforced.is_empty() {
        checks.push(Check::ok(
            "sandbox",
            format!("sandbox ({}): {}", policy.mode.id(), enforced.join("; ")),
        ));
    }
    for limit in support.limits(&policy) {
        checks.push(Check::failed(
            "sandbox",
            format!("sandbox: {limit}"),
            "see docs/permissions.md#the-command-sandbox for the kernel features each layer needs",
        ));
    }
    if support.landlock_abi.is_some_and(|abi| abi < 9) {
        checks.push(Check::absent(
            "sandbox",
            "sandbox: Unix sockets outside /tmp, /run, the runtime folder and the hidden secrets can still be connected (Landlock ABI 9 closes this)",
        ));
    }
    checks
}
