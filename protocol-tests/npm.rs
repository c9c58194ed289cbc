//! The npm packages (`dist/npm/build.sh`) installed the way a user's
//! `npx -y @maia-editors/maia acp` installs them, end to end: the host's
//! archive packed by `dist/release.sh` from the binary under test (the
//! debug build, not a release build: CI stays lean), the platform package
//! and the launcher made and `npm pack`ed by the script, both installed
//! into a scratch prefix from their tarballs with npm offline (a registry
//! address nothing answers at, an empty cache), then `npx -y … acp`
//! started there as the editor would and a prompt answered through it by
//! the mock LLM.
//!
//! Needs `npm` and `npx` (Node 18 or later) on PATH; without them the test
//! prints SKIPPED, or fails with `MAIA_REQUIRE_ALL=1`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use maia_test_support as mock;
use serde_json::Value;

use crate::harness::{Launcher, Maia, Options, agent_text};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const LAUNCHER: &str = "@maia-editors/maia";
/// What the launcher package may weigh packed: a script and a README.
const LAUNCHER_MAX_BYTES: u64 = 64 * 1024;

/// The host's (Rust target, npm os-cpu) when it is a release platform.
fn host_platform() -> Option<(String, String)> {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    let platforms = std::fs::read_to_string(repo().join("dist/platforms")).unwrap();
    platforms
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 3 && f[1] == os && f[2] == cpu)
        .map(|f| (f[0].to_owned(), format!("{os}-{cpu}")))
}

fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// npm with no registry, no user config and a cache of its own.
fn npm_env(scratch: &Path) -> Vec<(String, String)> {
    vec![
        ("npm_config_registry".into(), "http://127.0.0.1:9/".into()),
        ("npm_config_offline".into(), "true".into()),
        (
            "npm_config_cache".into(),
            scratch.join("npm-cache").display().to_string(),
        ),
        (
            "npm_config_userconfig".into(),
            scratch.join("npmrc").display().to_string(),
        ),
        ("npm_config_update_notifier".into(), "false".into()),
        ("npm_config_audit".into(), "false".into()),
        ("npm_config_fund".into(), "false".into()),
    ]
}

#[tokio::test]
async fn npx_runs_maia_from_the_packed_npm_packages() {
    if !mock::require(
        "npm and npx (Node 18 or later) on PATH",
        mock::on_path("npm") && mock::on_path("npx"),
    ) {
        return;
    }
    let Some((target, platform)) = host_platform() else {
        mock::require("a host that is a release platform (dist/platforms)", false);
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let archives = scratch.path().join("archives");
    let packages = scratch.path().join("packages");
    run(Command::new("bash")
        .arg(repo().join("dist/release.sh"))
        .arg(&target)
        .env("MAIA_RELEASE_BINARY", env!("CARGO_BIN_EXE_maia"))
        .env("MAIA_RELEASE_OUT", &archives));
    let listing = run(Command::new("bash")
        .arg(repo().join("dist/npm/build.sh"))
        .arg(&archives)
        .arg(&packages)
        .env("MAIA_NPM_PARTIAL", "1")
        .envs(npm_env(scratch.path())));
    eprintln!("{listing}");

    // The launcher lists every release platform; only the host's was built.
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(packages.join("maia/package.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["name"], LAUNCHER);
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest["bin"]["maia"], "bin/maia.js");
    let optional = manifest["optionalDependencies"].as_object().unwrap();
    assert_eq!(optional.len(), 4, "{optional:?}");
    let host_package = format!("@maia-editors/maia-{platform}");
    assert_eq!(optional[&host_package], env!("CARGO_PKG_VERSION"));
    let platform_manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(packages.join(format!("maia-{platform}/package.json"))).unwrap(),
    )
    .unwrap();
    let (os, cpu) = platform.split_once('-').unwrap();
    assert_eq!(platform_manifest["os"], serde_json::json!([os]));
    assert_eq!(platform_manifest["cpu"], serde_json::json!([cpu]));

    let version = env!("CARGO_PKG_VERSION");
    let launcher_tgz = packages.join(format!("maia-editors-maia-{version}.tgz"));
    let platform_tgz = packages.join(format!("maia-editors-maia-{platform}-{version}.tgz"));
    let size = std::fs::metadata(&launcher_tgz).unwrap().len();
    assert!(size < LAUNCHER_MAX_BYTES, "launcher is {size} bytes");
    eprintln!(
        "{LAUNCHER}: {size} bytes; {host_package}: {} bytes (a debug build)",
        std::fs::metadata(&platform_tgz).unwrap().len()
    );

    // Installed from the tarballs into a scratch prefix, offline.
    let prefix = scratch.path().join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    std::fs::write(prefix.join("package.json"), "{\"private\": true}\n").unwrap();
    run(Command::new("npm")
        .arg("install")
        .arg(&platform_tgz)
        .arg(&launcher_tgz)
        .current_dir(&prefix)
        .envs(npm_env(scratch.path())));
    let installed = prefix.join("node_modules/@maia-editors");
    assert!(
        installed
            .join(format!("maia-{platform}/bin/maia"))
            .is_file()
    );

    // `npx -y @maia-editors/maia acp`, as an editor's agent command.
    let (mut maia, sid) = Maia::ready_with(Options {
        launcher: Some(Launcher {
            program: "npx".into(),
            args: vec!["-y".into(), LAUNCHER.into()],
            dir: prefix.clone(),
            env: npm_env(scratch.path()),
        }),
        ..Options::default()
    })
    .await;
    let (resp, before) = maia
        .answered_turn(&sid, "hello", "Answered through npx.")
        .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(agent_text(&before), "Answered through npx.");
    assert_eq!(maia.mock.requests().len(), 1);
    maia.close_stdin();
    let status = maia.wait_exit(Duration::from_secs(10)).await;
    assert!(
        status.success(),
        "the launcher passes maia's exit: {status}"
    );
}
