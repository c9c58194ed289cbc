//! The ACP Registry entry (`dist/acp-registry/agent.json`, issue 14): valid
//! against the registry's schema (`fixtures/acp-registry/`, a copy with its
//! source and version noted), the
//! crate's version and repository, the four platforms with the archive
//! names `dist/release.sh` produces, and that script's archive itself.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn manifest() -> Value {
    let path = repo().join("dist/acp-registry/agent.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The registry platform keys and the Rust targets the script builds.
const PLATFORMS: [(&str, &str); 4] = [
    ("linux-x86_64", "x86_64-unknown-linux-gnu"),
    ("linux-aarch64", "aarch64-unknown-linux-gnu"),
    ("darwin-aarch64", "aarch64-apple-darwin"),
    ("darwin-x86_64", "x86_64-apple-darwin"),
];

fn archive_name(target: &str) -> String {
    format!("maia-{}-{target}.tar.gz", env!("CARGO_PKG_VERSION"))
}

#[test]
fn the_manifest_validates_against_the_registry_schema() {
    let schema_path = repo().join("protocol-tests/fixtures/acp-registry/agent.schema.json");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(&schema_path)
            .unwrap_or_else(|e| panic!("{}: {e}", schema_path.display())),
    )
    .unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let agent = manifest();
    let errors: Vec<String> = validator
        .iter_errors(&agent)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The validator does catch mistakes.
    let mut broken = agent.clone();
    broken["distribution"]["binary"]["linux-x86_64"]
        .as_object_mut()
        .unwrap()
        .remove("cmd");
    broken["id"] = "MAIA".into();
    assert!(validator.iter_errors(&broken).count() >= 2);
}

#[test]
fn the_manifest_matches_the_crate_and_the_release_script() {
    let agent = manifest();
    assert_eq!(agent["id"], "maia");
    assert_eq!(agent["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(agent["repository"], env!("CARGO_PKG_REPOSITORY"));
    assert_eq!(agent["license"], env!("CARGO_PKG_LICENSE"));
    let binary = agent["distribution"]["binary"].as_object().unwrap();
    assert_eq!(binary.len(), PLATFORMS.len(), "{binary:?}");
    for (platform, target) in PLATFORMS {
        let entry = &binary[platform];
        let archive = entry["archive"].as_str().unwrap();
        let expected = format!(
            "{}/releases/download/v{}/{}",
            env!("CARGO_PKG_REPOSITORY"),
            env!("CARGO_PKG_VERSION"),
            archive_name(target)
        );
        assert_eq!(archive, expected, "{platform}");
        assert_eq!(entry["cmd"], "./maia", "{platform}");
        assert_eq!(entry["args"], serde_json::json!(["acp"]), "{platform}");
    }
}

#[test]
fn the_release_script_packs_the_archive_the_manifest_names() {
    let out = tempfile::tempdir().unwrap();
    let target = "x86_64-unknown-linux-gnu";
    let status = std::process::Command::new("bash")
        .arg(repo().join("dist/release.sh"))
        .arg(target)
        .env("MAIA_RELEASE_BINARY", env!("CARGO_BIN_EXE_maia"))
        .env("MAIA_RELEASE_OUT", out.path())
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let archive = out.path().join(archive_name(target));
    assert!(
        archive.exists(),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    let listing = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(&archive)
        .output()
        .unwrap();
    let names: Vec<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(names, ["LICENSE", "README.md", "maia"]);
    // A target the manifest does not list is refused.
    let refused = std::process::Command::new("bash")
        .arg(repo().join("dist/release.sh"))
        .arg("riscv64gc-unknown-linux-gnu")
        .env("MAIA_RELEASE_BINARY", env!("CARGO_BIN_EXE_maia"))
        .env("MAIA_RELEASE_OUT", out.path())
        .output()
        .unwrap();
    assert!(!refused.status.success());
}
